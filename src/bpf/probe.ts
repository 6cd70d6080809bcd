// Feature probes for svcmap preflight: each asks the running kernel by
// loading something, never by its version number, and attaches nothing.
// - a program of a compiled object, loaded alone (the object's other
//   programs not loaded) with private maps (nothing pinned);
// - libbpf's probes: a minimal program of a type, and one calling a helper;
// - a kfunc: a FUNC of that name in the kernel's BTF;
// - tcx: a BPF_LINK_CREATE of a loaded sched_cls program on ifindex 0, which
//   no interface has: a kernel with tcx answers ENODEV (it looked for the
//   device), one without answers EINVAL (it does not know the attach type).
import { closeSync } from 'node:fs';
import { BpfError, errnoName, errnoNumber } from './errors.ts';
import { libbpfText } from './map.ts';
import { type Ptr, native, takeLibbpfLog } from './native.ts';
import { BpfObject } from './object.ts';

export interface ProbeOutcome {
  ok: boolean;
  /** What was found, or what failed (errno and libbpf's or the verifier's last words). */
  detail: string;
}

export interface ProgramProbe extends ProbeOutcome {
  /** libbpf's names: cgroup_sock_addr, cgroup_inet4_connect... (undefined when the object did not open). */
  progType?: string;
  attachType?: string;
}

const ENODEV = errnoNumber('ENODEV');
const BTF_KIND_FUNC = 12;

/** The last line of a failed load worth showing: the verifier's or libbpf's last words. */
function lastWords(err: unknown): string {
  if (!(err instanceof BpfError)) return (err as Error).message;
  const lines = err.log
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !/^verifier log/.test(l) && !/^processed \d+ insns/.test(l));
  const last = lines.at(-1);
  return `${err.code}: ${err.detail}${last ? ` (${last})` : ''}`;
}

/**
 * Loads program `program` of the object at objectPath alone (every other
 * program's autoload off), maps private, nothing attached; `withFd` gets the
 * loaded program's fd before everything is closed.
 */
export function probeProgram(objectPath: string, program: string, withFd?: (fd: number) => void): ProgramProbe {
  let object: BpfObject;
  try {
    object = BpfObject.open(objectPath);
  } catch (err) {
    return { ok: false, detail: lastWords(err) };
  }
  try {
    const progs = object.programs();
    const p = progs.find((x) => x.name === program);
    if (!p) return { ok: false, detail: `${objectPath} has no program ${program}` };
    for (const x of progs) native().programSetAutoload(x.handle, x === p);
    const n = native();
    const progType = (n.progTypeName(n.programType(p.handle)) as string | null) ?? `type ${n.programType(p.handle)}`;
    const at = n.programExpectedAttachType(p.handle) as number;
    const attachType = (n.attachTypeName(at) as string | null) ?? `attach type ${at}`;
    try {
      object.load();
    } catch (err) {
      return { ok: false, detail: lastWords(err), progType, attachType };
    }
    withFd?.(object.programFd(program));
    return { ok: true, detail: `loaded as ${progType}${p.section.includes('/') ? ` (${attachType})` : ''}`, progType, attachType };
  } finally {
    object.close();
  }
}

function libbpfProbe(rc: number, yes: string, no: string): ProbeOutcome {
  if (rc === 1) return { ok: true, detail: yes };
  if (rc === 0) return { ok: false, detail: no };
  takeLibbpfLog();
  return { ok: false, detail: `the probe failed: ${errnoName(rc)}: ${libbpfText(rc)}` };
}

/**
 * Whether programs of this type may call the helper (libbpf_probe_bpf_helper:
 * loads a minimal program calling it). libbpf 1.1 takes a load that fails
 * without the verifier naming the helper (EPERM, say) for "supported", so
 * the helper is asked only where a minimal program of the type loads
 * (libbpf_probe_bpf_prog_type).
 */
export function probeHelper(progType: number, helperId: number, helperName: string): ProbeOutcome {
  const type = (native().progTypeName(progType) as string | null) ?? `type ${progType}`;
  const loads = native().probeProgType(progType, null) as number;
  if (loads !== 1) {
    takeLibbpfLog();
    return {
      ok: false,
      detail: `not probed: not even a minimal ${type} program loads here (${loads < 0 ? errnoName(loads) : 'no privilege, or no kernel support'})`,
    };
  }
  return libbpfProbe(
    native().probeHelper(progType, helperId, null) as number,
    `${type} programs may call ${helperName}`,
    `the kernel does not offer ${helperName} to ${type} programs`,
  );
}

/** Whether the kernel's BTF (/sys/kernel/btf/vmlinux) has a function of this name: the kfunc a program would call. */
export function probeKfunc(name: string): ProbeOutcome {
  takeLibbpfLog();
  const btf = native().btfLoadVmlinux() as Ptr | null;
  if (!btf) {
    takeLibbpfLog();
    return { ok: false, detail: 'the kernel has no BTF to resolve kfuncs against' };
  }
  try {
    const id = native().btfFindByNameKind(btf, name, BTF_KIND_FUNC) as number;
    return id > 0
      ? { ok: true, detail: `kernel BTF has ${name} (id ${id})` }
      : { ok: false, detail: `the kernel's BTF has no function ${name}` };
  } finally {
    native().btfFree(btf);
  }
}

/** Whether the kernel makes tcx links, asked with a loaded sched_cls program on ifindex 0 (no interface: nothing is attached). */
export function probeTcx(schedClsFd: number): ProbeOutcome {
  const rc = native().tcxLinkCreate(schedClsFd, 0, 1) as number;
  if (rc >= 0) {
    // Cannot happen (no device has ifindex 0); never leave a link behind.
    closeSync(rc);
    return { ok: true, detail: 'tcx links are made' };
  }
  if (-rc === ENODEV) return { ok: true, detail: 'the kernel knows the tcx attach types (ENODEV for ifindex 0)' };
  return { ok: false, detail: `${errnoName(rc)} for a tcx link: the kernel has no tcx` };
}
