// BPF_PROG_TEST_RUN: run a loaded program on a crafted packet, in the
// kernel, without attaching it anywhere. The tc programs' unit tests use it;
// it is also how a person can check what the datapath does to one packet.
//
// The FFI passes buffers without lengths, so every length is checked here:
// the packet must be at least an Ethernet header (the kernel's minimum for
// skb and XDP programs), and the output buffer must be non-empty, because a
// data_size_out of 0 tells the kernel there is no limit at all.
import { BpfError, errnoNumber } from './errors.ts';
import { libbpfText } from './map.ts';
import { native } from './native.ts';

/** The smallest packet the kernel takes for skb (tc) and XDP programs: an Ethernet header. */
export const TEST_RUN_MIN_PACKET = 14;

/** Room for growth (encapsulation, options) beyond the input size, by default. */
const DEFAULT_OUT_HEADROOM = 512;

const ENOSPC = errnoNumber('ENOSPC');

export interface TestRunOptions {
  /** Runs of the program; durationNs is the mean. Default 1. */
  repeat?: number;
  /** The context in (for tc: a struct __sk_buff, e.g. to set ifindex or mark). */
  ctx?: Buffer;
  /** Size of the buffer for the packet the program leaves; default packet length + 512. */
  dataOutSize?: number;
}

export interface TestRunResult {
  /** The program's return value (for tc: TC_ACT_*). */
  retval: number;
  /** The packet as the program left it: rewritten, grown or shrunk. */
  packetOut: Buffer;
  /** Mean run time per repeat, in nanoseconds, as the kernel measured it. */
  durationNs: number;
  /** The context out, when a context was passed in. */
  ctxOut?: Buffer;
}

function u32Option(name: string, value: number, min: number): number {
  if (!Number.isInteger(value) || value < min || value > 0xffff_ffff) {
    throw new RangeError(`prog test run: ${name} must be an integer from ${min} to 4294967295, got ${value}`);
  }
  return value;
}

/** Runs the program behind progFd once (or `repeat` times) on `packet`. */
export function progTestRun(progFd: number, packet: Buffer, opts: TestRunOptions = {}): TestRunResult {
  if (packet.length < TEST_RUN_MIN_PACKET) {
    throw new RangeError(
      `prog test run: the packet is ${packet.length} bytes; the kernel needs at least ${TEST_RUN_MIN_PACKET} (an Ethernet header)`,
    );
  }
  u32Option('packet length', packet.length, TEST_RUN_MIN_PACKET);
  const repeat = u32Option('repeat', opts.repeat ?? 1, 1);
  const outSize = u32Option('dataOutSize', opts.dataOutSize ?? packet.length + DEFAULT_OUT_HEADROOM, 1);
  if (opts.ctx && opts.ctx.length === 0) throw new RangeError('prog test run: ctx is empty; pass no ctx instead');
  if (opts.ctx) u32Option('ctx length', opts.ctx.length, 1);

  const dataOut = Buffer.alloc(outSize);
  const sizeOut = Buffer.alloc(4);
  sizeOut.writeUInt32LE(outSize);
  let ctxOut: Buffer | null = null;
  let ctxSizeOut: Buffer | null = null;
  if (opts.ctx) {
    ctxOut = Buffer.alloc(opts.ctx.length);
    ctxSizeOut = Buffer.alloc(4);
    ctxSizeOut.writeUInt32LE(opts.ctx.length);
  }
  const retval = Buffer.alloc(4);
  const duration = Buffer.alloc(4);

  const rc = native().progTestRun(
    progFd,
    packet,
    packet.length,
    dataOut,
    sizeOut,
    opts.ctx ?? null,
    opts.ctx?.length ?? 0,
    ctxOut,
    ctxSizeOut,
    repeat,
    retval,
    duration,
  ) as number;
  if (rc < 0) {
    const hint = rc === -ENOSPC ? ` (the program left a packet larger than dataOutSize ${outSize})` : '';
    throw new BpfError(`prog test run of fd ${progFd}`, rc, `${libbpfText(rc)}${hint}`);
  }
  const n = sizeOut.readUInt32LE();
  if (n > outSize) throw new Error(`prog test run: the kernel reported ${n} bytes out for a ${outSize}-byte buffer`);
  const result: TestRunResult = {
    retval: retval.readUInt32LE(),
    packetOut: Buffer.from(dataOut.subarray(0, n)),
    durationNs: duration.readUInt32LE(),
  };
  if (ctxOut && ctxSizeOut) {
    const m = ctxSizeOut.readUInt32LE();
    if (m > ctxOut.length) throw new Error(`prog test run: the kernel reported a ${m}-byte context for a ${ctxOut.length}-byte buffer`);
    result.ctxOut = Buffer.from(ctxOut.subarray(0, m));
  }
  return result;
}

/**
 * Runs a BPF_PROG_TYPE_SYSCALL program once with `ctx` as its context (the
 * kernel takes no packet, no output buffers and no repeat count for these)
 * and returns its return value, as a signed number.
 */
export function progRunSyscall(progFd: number, ctx: Buffer): number {
  if (ctx.length === 0) throw new RangeError('syscall program run: ctx is empty');
  u32Option('ctx length', ctx.length, 1);
  const sizeOut = Buffer.alloc(4);
  const retval = Buffer.alloc(4);
  const duration = Buffer.alloc(4);
  const rc = native().progTestRun(progFd, null, 0, null, sizeOut, ctx, ctx.length, null, null, 0, retval, duration) as number;
  if (rc < 0) throw new BpfError(`syscall program run of fd ${progFd}`, rc, libbpfText(rc));
  return retval.readInt32LE();
}
