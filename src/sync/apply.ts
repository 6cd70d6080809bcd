// Carries out a plan against the maps, phase by phase, each phase one batch
// syscall per map. Stops at the first failure: every earlier phase is whole,
// so the maps stay consistent for readers, and the caller re-reads them.
import type { BackendValue, RevNatValue, SrcRangeKey, SvcKey, SvcValue } from '../maps/codecs.ts';
import type { Plan, SlotWrite } from './plan.ts';

/** The writes the sync engine makes; the real one is DatapathMaps, tests may record. */
export interface MapWriter {
  putBackends(entries: ReadonlyArray<readonly [number, BackendValue]>): void;
  putRevNat(entries: ReadonlyArray<readonly [number, RevNatValue]>): void;
  putServices(entries: ReadonlyArray<readonly [SvcKey, SvcValue]>): void;
  /** Backend slots (services map entries with slot > 0). */
  putSlots(slots: readonly SlotWrite[]): void;
  putSrcRanges(keys: readonly SrcRangeKey[]): void;
  deleteSrcRanges(keys: readonly SrcRangeKey[]): void;
  deleteServices(keys: readonly SvcKey[]): void;
  deleteRevNat(ids: readonly number[]): void;
  deleteBackends(ids: readonly number[]): void;
  /** Maglev tables, each published whole in one update (svcmap_maglev); optional for writers of tests without Maglev. */
  putMaglev?(tables: ReadonlyArray<readonly [number, Uint16Array]>): void;
  deleteMaglev?(revNatIds: readonly number[]): void;
}

function maglevWriter(w: MapWriter): Required<Pick<MapWriter, 'putMaglev' | 'deleteMaglev'>> {
  if (!w.putMaglev || !w.deleteMaglev) throw new Error('this map writer cannot write Maglev tables');
  return w as Required<Pick<MapWriter, 'putMaglev' | 'deleteMaglev'>>;
}

export const PHASES = [
  'backends',
  'revnat',
  'source-ranges',
  'slots',
  'maglev',
  'masters',
  'removed-masters',
  'stale-maglev',
  'stale-slots',
  'stale-revnat',
  'stale-source-ranges',
  'stale-backends',
] as const;
export type Phase = (typeof PHASES)[number];

export class ApplyError extends Error {
  readonly phase: Phase;
  override readonly cause: unknown;
  constructor(phase: Phase, cause: unknown) {
    super(`writing ${phase} failed: ${(cause as Error)?.message ?? String(cause)}`);
    this.name = 'ApplyError';
    this.phase = phase;
    this.cause = cause;
  }
}

export function applyPlan(plan: Plan, w: MapWriter): void {
  const steps: Array<[Phase, () => void]> = [
    ['backends', () => w.putBackends(plan.backendUpserts)],
    ['revnat', () => w.putRevNat(plan.revNatUpserts)],
    ['source-ranges', () => w.putSrcRanges(plan.srcRangeUpserts)],
    ['slots', () => w.putSlots(plan.slotUpserts)],
    [
      'maglev',
      () => {
        if (plan.maglevUpserts.length) maglevWriter(w).putMaglev(plan.maglevUpserts);
      },
    ],
    ['masters', () => w.putServices(plan.masterUpserts)],
    ['removed-masters', () => w.deleteServices(plan.masterDeletes)],
    [
      'stale-maglev',
      () => {
        if (plan.maglevDeletes.length) maglevWriter(w).deleteMaglev(plan.maglevDeletes);
      },
    ],
    ['stale-slots', () => w.deleteServices(plan.slotDeletes)],
    ['stale-revnat', () => w.deleteRevNat(plan.revNatDeletes)],
    ['stale-source-ranges', () => w.deleteSrcRanges(plan.srcRangeDeletes)],
    ['stale-backends', () => w.deleteBackends(plan.backendDeletes)],
  ];
  for (const [phase, run] of steps) {
    try {
      run();
    } catch (err) {
      throw new ApplyError(phase, err);
    }
  }
}
