// What a Service asks of svcmap through its annotations (only these are kept,
// see SERVICE_ANNOTATIONS in schemas.ts). A value svcmap does not know, or
// does not implement yet, is a Problem on the Service naming the annotation
// and the accepted values (field path metadata.annotations["..."], so the
// agent reports it as an UnknownAnnotationValue Event); the Service is still
// programmed, with the default.
import {
  type LbAlgorithmName,
  type LbMode,
  LB_ALGORITHM_NAMES,
  LB_MODES,
  SVCMAP_MAGLEV_DEFAULT_M,
  MAGLEV_TABLE_SIZES,
} from '../maps/constants.ts';
import { METADATA_KEYS } from './metadata-keys.ts';
import { problemAbout } from './problems.ts';
import type { Service } from './schemas.ts';
import type { Problem } from './types.ts';

export const LB_ALGORITHM_ANNOTATION = METADATA_KEYS.lbAlgorithm.key;
export const SOURCE_HASH_PORT_ANNOTATION = METADATA_KEYS.sourceHashPort.key;
export const MAGLEV_TABLE_SIZE_ANNOTATION = METADATA_KEYS.maglevTableSize.key;
export const LB_MODE_ANNOTATION = METADATA_KEYS.lbMode.key;

/** Algorithms of issue 14 that a Service may name but that are not built yet: reported as such. */
const NOT_YET = new Set<string>([]);

export interface ServiceOptions {
  /** The algorithm the Service asks for; undefined: the node's default (--lb-algorithm). */
  algorithm?: LbAlgorithmName;
  /** sh at tc hashes the client's source port too. */
  sourceHashPort: boolean;
  /** svcmap.io/maglev-table-size, when valid; undefined: SVCMAP_MAGLEV_DEFAULT_M. Used by maglev only. */
  maglevTableSize?: number;
  /** svcmap.io/lb-mode, when valid; undefined: the node's default (--lb-mode). */
  lbMode?: LbMode;
}

function path(annotation: string): string {
  return `metadata.annotations["${annotation}"]`;
}

export function serviceOptions(svc: Service, problems: Problem[]): ServiceOptions {
  const a = svc.metadata.annotations;
  const out: ServiceOptions = { sourceHashPort: false };
  const alg = a?.[LB_ALGORITHM_ANNOTATION];
  if (alg !== undefined) {
    const v = alg.trim();
    if ((LB_ALGORITHM_NAMES as readonly string[]).includes(v)) {
      out.algorithm = v as LbAlgorithmName;
    } else {
      const what = NOT_YET.has(v) ? `"${v}" is not implemented yet` : `unknown value ${JSON.stringify(alg)}`;
      problems.push(
        problemAbout(
          svc,
          'warning',
          path(LB_ALGORITHM_ANNOTATION),
          `${what}; accepted values: ${LB_ALGORITHM_NAMES.join(', ')}; using the node's default`,
        ),
      );
    }
  }
  const port = a?.[SOURCE_HASH_PORT_ANNOTATION];
  if (port !== undefined) {
    const v = port.trim();
    if (v === 'true' || v === 'false') out.sourceHashPort = v === 'true';
    else {
      problems.push(
        problemAbout(
          svc,
          'warning',
          path(SOURCE_HASH_PORT_ANNOTATION),
          `unknown value ${JSON.stringify(port)}; accepted values: true, false; using false`,
        ),
      );
    }
  }
  const size = a?.[MAGLEV_TABLE_SIZE_ANNOTATION];
  if (size !== undefined) {
    const v = size.trim();
    const n = /^\d+$/.test(v) ? Number(v) : NaN;
    if ((MAGLEV_TABLE_SIZES as readonly number[]).includes(n)) out.maglevTableSize = n;
    else {
      problems.push(
        problemAbout(
          svc,
          'warning',
          path(MAGLEV_TABLE_SIZE_ANNOTATION),
          `unknown value ${JSON.stringify(size)}; accepted values (primes): ${MAGLEV_TABLE_SIZES.join(', ')}; using ${SVCMAP_MAGLEV_DEFAULT_M}`,
        ),
      );
    }
  }
  const mode = a?.[LB_MODE_ANNOTATION];
  if (mode !== undefined) {
    const v = mode.trim();
    if ((LB_MODES as readonly string[]).includes(v)) out.lbMode = v as LbMode;
    else {
      problems.push(
        problemAbout(
          svc,
          'warning',
          path(LB_MODE_ANNOTATION),
          `unknown value ${JSON.stringify(mode)}; accepted values: ${LB_MODES.join(', ')}; using the node's default`,
        ),
      );
    }
  }
  return out;
}
