// Kubernetes name rules the validation checks, shared by the zod schemas
// (schemas.ts) and the lean EndpointSlice path (lean-slice.ts).
import { METADATA_KEYS } from './metadata-keys.ts';

export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
export const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** Service and EndpointSlice port names: DNS labels, '' for a single unnamed port. */
export const PORT_NAME = /^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Set by the EndpointSlice controller: when the change that led to this version happened. */
export const LAST_CHANGE_TRIGGER_TIME = METADATA_KEYS.lastChangeTriggerTime.key;

/** The slice's trigger time (ms since the epoch) from its annotations; an unreadable value is ignored, never an error. */
export function triggerTime(annotations: Record<string, unknown> | null | undefined): number | undefined {
  const raw = annotations?.[LAST_CHANGE_TRIGGER_TIME];
  const at = typeof raw === 'string' ? Date.parse(raw) : Number.NaN;
  return Number.isFinite(at) ? at : undefined;
}
