// svcmap preflight: whether this node can run the datapath, asked of the
// kernel by loading (never by its version number) and attaching nothing.
// REQUIREMENTS is the one list: what each item is, the first kernel that
// has it (for docs/compatibility.md; the probe does not read it), what uses
// it and what happens without it. verdict() is pure: the tests give it
// made-up probe outcomes.
import { existsSync } from 'node:fs';
import { release } from 'node:os';
import { compileBpf, type BpfProgramName } from '../bpf/compile.ts';
import {
  CAP_BPF,
  CAP_NET_ADMIN,
  CAP_PERFMON,
  CAP_SYS_ADMIN,
  EnvironmentError,
  bpffsMountFor,
  checkCgroup,
  defaultCgroup,
  effectiveCaps,
  ensureBpffs,
  hasCap,
} from '../bpf/environment.ts';
import { type ProbeOutcome, probeHelper, probeKfunc, probeProgram, probeTcx } from '../bpf/probe.ts';
import { agentCommand } from './agent.ts';
import { command, parseFlags, pinDirFlag } from './args.ts';
import { formatData, outputFlag, table } from './format.ts';

/** required: the agent does not start without it (exit 1); optional: a feature is off (a warning); info: told, not judged. */
export type Level = 'required' | 'optional' | 'info';

export type Probe =
  | { kind: 'kernel' }
  | { kind: 'btf' }
  | { kind: 'caps'; anyOf: number[] }
  | { kind: 'bpffs' }
  | { kind: 'cgroup2' }
  | { kind: 'program'; object: BpfProgramName; program: string }
  | { kind: 'helper'; progType: number; helper: number; name: string }
  | { kind: 'kfunc'; name: string }
  | { kind: 'tcx' };

export interface Requirement {
  id: string;
  what: string;
  /** The first Linux release that has it (documentation only). */
  since: string;
  level: Level;
  usedBy: string;
  /** What happens on a node without it. */
  without: string;
  /** What to do when it is missing (the probe's own message comes first where it names a fix). */
  fix: string;
  probe: Probe;
}

// enum bpf_prog_type and the helper ids of enum bpf_func_id (linux/bpf.h).
const PROG_SCHED_CLS = 3;
const PROG_CGROUP_SOCK_ADDR = 18;

const STOPS = 'the agent cannot start';
const NEWER_KERNEL = 'a kernel that has it (see docs/compatibility.md)';
const TERMINATION_OFF = 'socket termination is off: connected sockets sent to a removed backend keep it until the application reconnects';
const RECOUNT_OFF = "the socket recount is off: the socket LB's connection counts are kept by the datapath alone";

const sockHook = (hook: string, since: string, usedBy: string): Requirement => ({
  id: `program:${hook}`,
  what: `cgroup/${hook} program`,
  since,
  level: 'required',
  usedBy,
  without: STOPS,
  fix: NEWER_KERNEL,
  probe: { kind: 'program', object: 'sock', program: `svcmap_${hook.replace('getpeername', 'getpeer')}` },
});

const helper = (name: string, id: number, progType: number, typeName: string, since: string, usedBy: string): Requirement => ({
  id: `helper:${name}:${typeName}`,
  what: `helper ${name} in ${typeName}`,
  since,
  level: 'required',
  usedBy,
  without: STOPS,
  fix: NEWER_KERNEL,
  probe: { kind: 'helper', progType, helper: id, name },
});

export const REQUIREMENTS: readonly Requirement[] = [
  {
    id: 'kernel',
    what: 'kernel release',
    since: '-',
    level: 'info',
    usedBy: 'docs/compatibility.md lists the kernels tested',
    without: '-',
    fix: '-',
    probe: { kind: 'kernel' },
  },
  {
    id: 'cap:bpf',
    what: 'CAP_BPF (or CAP_SYS_ADMIN)',
    since: '5.8',
    level: 'required',
    usedBy: 'loading programs, creating and pinning maps',
    without: STOPS,
    fix: 'run as root, or add the capability BPF (kernels before 5.8: SYS_ADMIN)',
    probe: { kind: 'caps', anyOf: [CAP_BPF, CAP_SYS_ADMIN] },
  },
  {
    id: 'cap:net_admin',
    what: 'CAP_NET_ADMIN',
    since: '-',
    level: 'required',
    usedBy: 'attaching the socket hooks and the tc programs',
    without: STOPS,
    fix: 'run as root, or add the capability NET_ADMIN',
    probe: { kind: 'caps', anyOf: [CAP_NET_ADMIN] },
  },
  {
    id: 'cap:perfmon',
    what: 'CAP_PERFMON (or CAP_SYS_ADMIN)',
    since: '5.8',
    level: 'optional',
    usedBy: 'loading the socket iterators (tracing programs)',
    without: `${TERMINATION_OFF}; ${RECOUNT_OFF}`,
    fix: 'run as root, or add the capability PERFMON',
    probe: { kind: 'caps', anyOf: [CAP_PERFMON, CAP_SYS_ADMIN] },
  },
  {
    id: 'cap:sys_admin',
    what: 'CAP_SYS_ADMIN',
    since: '-',
    level: 'optional',
    usedBy: "entering pods' network namespaces to end their stale sockets; mounting bpffs when it is not",
    without: "socket termination reaches the agent's own network namespace only; bpffs must be mounted beforehand",
    fix: 'run as root, or add the capability SYS_ADMIN',
    probe: { kind: 'caps', anyOf: [CAP_SYS_ADMIN] },
  },
  {
    id: 'bpffs',
    what: 'bpffs at --pin-dir',
    since: '4.4',
    level: 'required',
    usedBy: 'pinned maps and links: the datapath outlives agent restarts; svcmap dump/status read it',
    without: STOPS,
    fix: "as the detail says (the chart's bpf.autoMount mounts bpffs), or pass --pin-dir a directory under a bpffs",
    probe: { kind: 'bpffs' },
  },
  {
    id: 'cgroup2',
    what: 'cgroup v2 at --cgroup',
    since: '4.5',
    level: 'required',
    usedBy: 'the socket hooks attach to it (every socket under it is load-balanced)',
    without: STOPS,
    fix: "as the detail says (the chart's cgroup.autoMount mounts cgroup v2), or pass --cgroup a cgroup v2 directory",
    probe: { kind: 'cgroup2' },
  },
  {
    id: 'btf',
    what: 'kernel BTF (/sys/kernel/btf/vmlinux)',
    since: '5.4',
    level: 'optional',
    usedBy: 'the socket iterators and the bpf_sock_destroy kfunc are resolved against it',
    without: `${TERMINATION_OFF}; ${RECOUNT_OFF}`,
    fix: 'a kernel built with CONFIG_DEBUG_INFO_BTF=y',
    probe: { kind: 'btf' },
  },
  sockHook('connect4', '4.17', 'socket LB: TCP and connected UDP to an IPv4 service'),
  sockHook('sendmsg4', '4.18', 'socket LB: unconnected UDP (DNS) to an IPv4 service'),
  sockHook('recvmsg4', '5.2', 'socket LB: UDP replies carry the IPv4 service address'),
  sockHook('getpeername4', '5.8', 'socket LB: getpeername() reports the IPv4 service address'),
  sockHook('connect6', '4.17', 'socket LB: TCP and connected UDP to an IPv6 service'),
  sockHook('sendmsg6', '4.18', 'socket LB: unconnected UDP (DNS) to an IPv6 service'),
  sockHook('recvmsg6', '5.2', 'socket LB: UDP replies carry the IPv6 service address'),
  sockHook('getpeername6', '5.8', 'socket LB: getpeername() reports the IPv6 service address'),
  sockHook('bind4', '4.17', "bind protection: the node's IPv4 sockets cannot bind a NodePort's port"),
  sockHook('bind6', '4.17', "bind protection: the node's IPv6 sockets cannot bind a NodePort's port"),
  {
    ...sockHook('sock_release', '5.9', 'per-backend connection counts (least-connections): a closed socket stops counting'),
    id: 'program:sock_release',
  },
  {
    id: 'program:tc_in',
    what: 'tc program (sched_cls, ingress)',
    since: '4.1',
    level: 'required',
    usedBy: 'NodePort, LoadBalancer and externalIPs from outside the node',
    without: STOPS,
    fix: NEWER_KERNEL,
    probe: { kind: 'program', object: 'tc', program: 'svcmap_tc_in' },
  },
  {
    id: 'program:tc_out',
    what: 'tc program (sched_cls, egress)',
    since: '4.1',
    level: 'required',
    usedBy: 'replies of NodePort/LoadBalancer flows (reverse NAT)',
    without: STOPS,
    fix: NEWER_KERNEL,
    probe: { kind: 'program', object: 'tc', program: 'svcmap_tc_out' },
  },
  {
    id: 'program:veth_in',
    what: "tc program (sched_cls) on a pod's veth, ingress",
    since: '4.1',
    level: 'required',
    usedBy: "per-packet translation of pods' traffic (--socket-lb=host-only, --veth-lb)",
    without: STOPS,
    fix: NEWER_KERNEL,
    probe: { kind: 'program', object: 'veth', program: 'svcmap_veth_in' },
  },
  {
    id: 'program:veth_out',
    what: "tc program (sched_cls) on a pod's veth, egress",
    since: '4.1',
    level: 'required',
    usedBy: 'replies to pods translated at their veths (reverse NAT)',
    without: STOPS,
    fix: NEWER_KERNEL,
    probe: { kind: 'program', object: 'veth', program: 'svcmap_veth_out' },
  },
  {
    id: 'program:xdp',
    what: 'XDP program (bpf_xdp_load_bytes/store_bytes)',
    since: '5.18',
    level: 'optional',
    usedBy: 'NodePort, LoadBalancer and externalIPs translated at the driver (--acceleration)',
    without: 'external traffic is translated at tc only',
    fix: NEWER_KERNEL,
    probe: { kind: 'program', object: 'xdp', program: 'svcmap_xdp' },
  },
  {
    id: 'program:conns_adjust',
    what: 'syscall program',
    since: '5.14',
    level: 'required',
    usedBy: "changing a backend's connection count atomically (BPF_PROG_RUN)",
    without: STOPS,
    fix: NEWER_KERNEL,
    probe: { kind: 'program', object: 'tc', program: 'svcmap_conns_adjust' },
  },
  helper('bpf_loop', 181, PROG_CGROUP_SOCK_ADDR, 'cgroup_sock_addr', '5.17', 'least-connections backend scan in the socket LB'),
  helper(
    'bpf_set_retval',
    187,
    PROG_CGROUP_SOCK_ADDR,
    'cgroup_sock_addr',
    '5.18',
    'a service without endpoints refuses connect() at once (ECONNREFUSED)',
  ),
  helper(
    'bpf_get_netns_cookie',
    122,
    PROG_CGROUP_SOCK_ADDR,
    'cgroup_sock_addr',
    '5.7',
    "the node's own sockets told from pods' (localhost NodePorts, bind protection; session affinity's client)",
  ),
  helper(
    'bpf_get_current_ancestor_cgroup_id',
    123,
    PROG_CGROUP_SOCK_ADDR,
    'cgroup_sock_addr',
    '5.7',
    'Pods that bypass the socket LB (svcmap.io/socket-lb) told by their pod-level cgroup',
  ),
  helper('bpf_loop', 181, PROG_SCHED_CLS, 'sched_cls', '5.17', 'least-connections backend scan in the tc programs'),
  helper('bpf_check_mtu', 163, PROG_SCHED_CLS, 'sched_cls', '5.12', 'NodePort forwarding: packets too big for the way out'),
  helper('bpf_redirect_neigh', 152, PROG_SCHED_CLS, 'sched_cls', '5.10', 'NodePort forwarding to a backend on another node'),
  {
    id: 'tcx',
    what: 'tcx links',
    since: '6.6',
    level: 'optional',
    usedBy: 'attaching the tc programs (--tc-attach auto)',
    without: 'the tc programs attach as clsact + cls_bpf filters instead (the fallback; --tc-attach tc)',
    fix: 'none needed (the fallback is automatic)',
    probe: { kind: 'tcx' },
  },
  {
    id: 'program:term_udp',
    what: 'iter/udp program',
    since: '5.9',
    level: 'optional',
    usedBy: 'socket termination: connected UDP sockets sent to a removed backend',
    without: TERMINATION_OFF,
    fix: NEWER_KERNEL,
    probe: { kind: 'program', object: 'sock_destroy', program: 'svcmap_term_udp' },
  },
  {
    id: 'program:term_tcp',
    what: 'iter/tcp program',
    since: '5.9',
    level: 'optional',
    usedBy: 'socket termination of TCP sockets (--destroy-tcp-sockets)',
    without: 'TCP sockets are not terminated even with --destroy-tcp-sockets',
    fix: NEWER_KERNEL,
    probe: { kind: 'program', object: 'sock_destroy', program: 'svcmap_term_tcp' },
  },
  {
    id: 'kfunc:bpf_sock_destroy',
    what: 'kfunc bpf_sock_destroy',
    since: '6.5',
    level: 'optional',
    usedBy: 'socket termination (the iterators end sockets with it)',
    without: TERMINATION_OFF,
    fix: NEWER_KERNEL,
    probe: { kind: 'kfunc', name: 'bpf_sock_destroy' },
  },
  {
    id: 'program:sk_recount',
    what: 'iter/bpf_sk_storage_map program (IPv4)',
    since: '5.11',
    level: 'optional',
    usedBy: 'the socket recount of connection counts (IPv4 backends)',
    without: RECOUNT_OFF,
    fix: NEWER_KERNEL,
    probe: { kind: 'program', object: 'sock_count', program: 'svcmap_sk_recount' },
  },
  {
    id: 'program:sk_recount6',
    what: 'iter/bpf_sk_storage_map program (IPv6)',
    since: '5.11',
    level: 'optional',
    usedBy: 'the socket recount of connection counts (IPv6 backends)',
    without: RECOUNT_OFF,
    fix: NEWER_KERNEL,
    probe: { kind: 'program', object: 'sock_count', program: 'svcmap_sk_recount6' },
  },
];

export type Status = 'ok' | 'missing' | 'info';

export interface Row {
  id: string;
  requirement: string;
  since: string;
  level: Level;
  status: Status;
  usedBy: string;
  without: string;
  /** What the probe found, or why it failed. */
  detail: string;
  /** Set when missing. */
  fix?: string;
}

export interface Verdict {
  rows: Row[];
  /** Whether the agent can run here: no required item missing. */
  canRun: boolean;
  exitCode: 0 | 1;
  missingRequired: Row[];
  /** Optional items missing: each a feature that is off. */
  warnings: Row[];
}

/** Judges probe outcomes (by requirement id); a requirement without an outcome is missing ("not probed"). */
export function verdict(requirements: readonly Requirement[], outcomes: ReadonlyMap<string, ProbeOutcome>): Verdict {
  const rows = requirements.map((r): Row => {
    const o = outcomes.get(r.id) ?? { ok: false, detail: 'not probed' };
    const status: Status = r.level === 'info' ? 'info' : o.ok ? 'ok' : 'missing';
    return {
      id: r.id,
      requirement: r.what,
      since: r.since,
      level: r.level,
      status,
      usedBy: r.usedBy,
      without: r.without,
      detail: o.detail,
      ...(status === 'missing' ? { fix: r.fix } : {}),
    };
  });
  const missingRequired = rows.filter((r) => r.status === 'missing' && r.level === 'required');
  const warnings = rows.filter((r) => r.status === 'missing' && r.level === 'optional');
  return { rows, canRun: missingRequired.length === 0, exitCode: missingRequired.length ? 1 : 0, missingRequired, warnings };
}

export interface ProbeOptions {
  pinDir: string;
  cgroup: string;
  /** Where the compiled objects are (compiled there when none matches, as the agent does). */
  objectDir?: string;
}

const fromCheck = (check: () => void, ok: string): ProbeOutcome => {
  try {
    check();
    return { ok: true, detail: ok };
  } catch (err) {
    if (err instanceof EnvironmentError) return { ok: false, detail: err.message };
    throw err;
  }
};

/** Runs every requirement's probe on this node. */
export function probeAll(requirements: readonly Requirement[], opts: ProbeOptions): Map<string, ProbeOutcome> {
  const out = new Map<string, ProbeOutcome>();
  const caps = effectiveCaps();
  const objects = new Map<BpfProgramName, { path?: string; error?: string }>();
  const objectPath = (program: BpfProgramName) => {
    let o = objects.get(program);
    if (!o) {
      try {
        o = { path: compileBpf({ program, ...(opts.objectDir ? { outDir: opts.objectDir } : {}) }).path };
      } catch (err) {
        o = { error: (err as Error).message.split('\n')[0]! };
      }
      objects.set(program, o);
    }
    return o;
  };
  // tcx is asked with the loaded ingress tc program's fd.
  let tcx: ProbeOutcome = { ok: false, detail: 'not probed: the tc program did not load' };
  const program = (object: BpfProgramName, name: string): ProbeOutcome => {
    const o = objectPath(object);
    if (!o.path) return { ok: false, detail: `no compiled object for bpf/${object}.c: ${o.error}` };
    return probeProgram(
      o.path,
      name,
      name === 'svcmap_tc_in'
        ? (fd) => {
            tcx = probeTcx(fd);
          }
        : undefined,
    );
  };
  for (const r of requirements) {
    const p = r.probe;
    switch (p.kind) {
      case 'kernel':
        out.set(r.id, { ok: true, detail: `Linux ${release()}` });
        break;
      case 'btf':
        out.set(
          r.id,
          existsSync('/sys/kernel/btf/vmlinux')
            ? { ok: true, detail: '/sys/kernel/btf/vmlinux' }
            : { ok: false, detail: '/sys/kernel/btf/vmlinux does not exist' },
        );
        break;
      case 'caps': {
        const has = p.anyOf.some((c) => hasCap(caps, c));
        out.set(r.id, {
          ok: has,
          detail: has ? 'in the effective set' : `not in the effective set (CapEff ${caps.toString(16).padStart(16, '0')})`,
        });
        break;
      }
      case 'bpffs': {
        const o = fromCheck(() => ensureBpffs(opts.pinDir, false), `${opts.pinDir} is on a bpffs`);
        // What the agent's own ensureBpffs(pinDir, true) would mount at start.
        const agentMounts =
          !o.ok && bpffsMountFor(opts.pinDir) === '/sys/fs/bpf' && existsSync('/sys/fs/bpf') && hasCap(caps, CAP_SYS_ADMIN);
        out.set(
          r.id,
          agentMounts ? { ok: true, detail: 'not mounted at /sys/fs/bpf yet: the agent mounts it at start (it has CAP_SYS_ADMIN)' } : o,
        );
        break;
      }
      case 'cgroup2':
        out.set(
          r.id,
          fromCheck(() => checkCgroup(opts.cgroup), `${opts.cgroup} is cgroup v2`),
        );
        break;
      case 'program':
        out.set(r.id, program(p.object, p.program));
        break;
      case 'helper':
        out.set(r.id, probeHelper(p.progType, p.helper, p.name));
        break;
      case 'kfunc':
        out.set(r.id, probeKfunc(p.name));
        break;
      case 'tcx':
        break; // below, once the tc program has loaded
    }
  }
  for (const r of requirements) {
    if (r.probe.kind !== 'tcx') continue;
    if (!requirements.some((x) => x.probe.kind === 'program' && x.probe.program === 'svcmap_tc_in')) program('tc', 'svcmap_tc_in');
    out.set(r.id, tcx);
  }
  return out;
}

export const preflightCommand = command({
  name: 'preflight',
  summary: 'whether this node can run svcmap: kernel features, mounts, capabilities',
  description:
    'Probes this node as the datapath needs it, by loading the compiled programs and minimal probe programs (nothing is attached), and prints one line per requirement: what it is, the first kernel that has it, what uses it, what happens without it, and whether this node has it. Exits 1 when a required item is missing (the agent could not run), 0 otherwise; a missing optional item turns a feature off and is a warning.',
  flags: {
    output: outputFlag(['table', 'json']),
    'pin-dir': pinDirFlag,
    cgroup: agentCommand.flags.cgroup,
    'bpf-dir': agentCommand.flags['bpf-dir'],
  },
});

const STATUS_WORD: Record<Status, string> = { ok: 'ok', missing: 'MISSING', info: 'info' };

export function preflightTable(v: Verdict): string {
  const rows = v.rows.map((r) => [
    r.status === 'missing' && r.level === 'optional' ? 'warn' : STATUS_WORD[r.status],
    r.requirement,
    r.level,
    r.since,
    r.usedBy,
    r.status === 'missing' ? `${r.detail}; without it: ${r.without}; fix: ${r.fix}` : r.detail,
  ]);
  return `${table(['STATUS', 'REQUIREMENT', 'LEVEL', 'SINCE', 'USED BY', 'DETAIL'], rows).join('\n')}\n`;
}

/** The error a node that cannot run svcmap ends with (exit 1): each missing item and its fix. */
export function cannotRunMessage(v: Verdict): string {
  return `svcmap preflight: this node cannot run svcmap: ${v.missingRequired.map((r) => `${r.requirement} is missing (${r.detail}; fix: ${r.fix})`).join('; ')}`;
}

export function preflight(argv: string[], out: (s: string) => void): void {
  const f = parseFlags(preflightCommand, argv);
  let cgroup = f.cgroup;
  if (cgroup === undefined) {
    try {
      cgroup = defaultCgroup();
    } catch (err) {
      if (!(err instanceof EnvironmentError)) throw err;
      cgroup = '/sys/fs/cgroup';
    }
  }
  const v = verdict(
    REQUIREMENTS,
    probeAll(REQUIREMENTS, { pinDir: f['pin-dir'], cgroup, ...(f['bpf-dir'] ? { objectDir: f['bpf-dir'] } : {}) }),
  );
  out(f.output === 'json' ? formatData({ canRun: v.canRun, requirements: v.rows }, 'json') : preflightTable(v));
  if (!v.canRun) throw new Error(cannotRunMessage(v));
}
