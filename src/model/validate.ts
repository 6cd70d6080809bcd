// The validation entry: one raw object (parsed YAML/JSON or an API response)
// to a validated Service, EndpointSlice, Node or Pod, or problems that name the
// object and the field. Plain Services and IPv4 EndpointSlices take the lean
// paths (lean-service.ts, lean-slice.ts); everything else, and every error,
// goes through the zod schemas (schemas.ts).
import * as z from 'zod';
import { renderIssue } from './issues.ts';
import { leanService } from './lean-service.ts';
import { leanIpv4Slice } from './lean-slice.ts';
import { type KubeObject, SCHEMAS, type ValidationResult, identify, isRecord, supportedKind } from './schemas.ts';
import type { Problem } from './types.ts';

/**
 * A plain Service or IPv4 EndpointSlice validated by the lean paths (zod's
 * output), or undefined: validate it with validateObject, which tells why.
 */
export function leanObject(raw: unknown): KubeObject | undefined {
  if (!isRecord(raw)) return undefined;
  return raw.kind === 'Service' ? leanService(raw) : raw.kind === 'EndpointSlice' ? leanIpv4Slice(raw) : undefined;
}

/**
 * Validate one raw object (parsed YAML/JSON or an API response) as a Service,
 * EndpointSlice, Node or Pod. Every problem names the object and the field.
 */
export function validateObject(raw: unknown, source?: string): ValidationResult {
  const id = identify(raw);
  const problem = (path: string, message: string): Problem => ({
    ...id,
    path,
    message,
    severity: 'error',
    ...(source === undefined ? {} : { source }),
  });
  if (!isRecord(raw)) return { ok: false, problems: [problem('', 'must be a mapping (a Kubernetes object)')] };
  if (typeof raw.kind !== 'string') return { ok: false, problems: [problem('kind', 'kind: is required')] };
  const kind = supportedKind(raw);
  if (kind === undefined) {
    return {
      ok: false,
      problems: [
        problem(
          'kind',
          `kind: ${raw.kind} (apiVersion ${String(raw.apiVersion)}) is not consumed by svcmap (Service, EndpointSlice, Node, Pod)`,
        ),
      ],
    };
  }
  // Most Services and slices (the API server's, already validated by it, and
  // plain manifests) are plain: a lean check of what the model reads, with
  // zod's output; anything else, and every error, goes through zod
  // (lean-service.ts, lean-slice.ts).
  const lean = leanObject(raw);
  if (lean) return { ok: true, obj: lean };
  const result = z.safeParse(SCHEMAS[kind], raw, { reportInput: true });
  if (result.success) return { ok: true, obj: result.data };
  return {
    ok: false,
    problems: result.error.issues.map((issue) => {
      const { path, message } = renderIssue(issue);
      return problem(path, message);
    }),
  };
}
