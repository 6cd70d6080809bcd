// metav1.Status bodies, shaped and worded like k8s.io/apimachinery/pkg/api/errors builds
// them, because clients branch on code and reason (410 "Expired", 409 "Conflict", ...).

import { qualifiedName, type Resource } from './resources.ts';

export interface StatusCause {
  reason?: string;
  message?: string;
  field?: string;
}

export interface Status {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: { continue?: string };
  status: 'Success' | 'Failure';
  message?: string;
  reason?: string;
  details?: { name?: string; group?: string; kind?: string; uid?: string; causes?: StatusCause[]; retryAfterSeconds?: number };
  code: number;
}

/** An API error: thrown by the store and handlers, answered over HTTP as its Status. */
export class ApiError extends Error {
  readonly status: Status;
  constructor(status: Status) {
    super(status.message ?? status.reason ?? `HTTP ${status.code}`);
    this.name = 'ApiError';
    this.status = status;
  }
  get code(): number {
    return this.status.code;
  }
  get reason(): string | undefined {
    return this.status.reason;
  }
}

function failure(code: number, reason: string, message: string, details?: Status['details']): Status {
  const s: Status = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
  if (details) s.details = details;
  return s;
}

function resourceDetails(r: Resource, name: string): NonNullable<Status['details']> {
  return r.group ? { name, group: r.group, kind: r.plural } : { name, kind: r.plural };
}

export function notFound(r: Resource, name: string): ApiError {
  return new ApiError(failure(404, 'NotFound', `${qualifiedName(r)} "${name}" not found`, resourceDetails(r, name)));
}

export function alreadyExists(r: Resource, name: string): ApiError {
  return new ApiError(failure(409, 'AlreadyExists', `${qualifiedName(r)} "${name}" already exists`, resourceDetails(r, name)));
}

export function conflict(
  r: Resource,
  name: string,
  why = 'the object has been modified; please apply your changes to the latest version and try again',
): ApiError {
  return new ApiError(
    failure(409, 'Conflict', `Operation cannot be fulfilled on ${qualifiedName(r)} "${name}": ${why}`, resourceDetails(r, name)),
  );
}

/** 410 Gone / Expired: a resourceVersion or continue token older than the kept history. */
export function expired(message: string, continueToken?: string): ApiError {
  const s = failure(410, 'Expired', message);
  if (continueToken !== undefined) s.metadata.continue = continueToken;
  return new ApiError(s);
}

export function tooOldResourceVersion(requested: number, oldest: number): ApiError {
  // The watch cache's wording (watch_cache.go): "too old resource version: %d (%d)".
  return expired(`too old resource version: ${requested} (${oldest})`);
}

export function badRequest(message: string): ApiError {
  return new ApiError(failure(400, 'BadRequest', message));
}

export function invalid(kind: string, group: string, name: string, causes: StatusCause[]): ApiError {
  const text = causes.map((c) => `${c.field}: ${c.message}`).join(', ');
  const details: NonNullable<Status['details']> = group ? { name, group, kind, causes } : { name, kind, causes };
  return new ApiError(failure(422, 'Invalid', `${kind}${group ? '.' + group : ''} "${name}" is invalid: ${text}`, details));
}

/** 504: a list asked for a resourceVersion the store has not reached (storage.NewTooLargeResourceVersionError). */
export function tooLargeResourceVersion(requested: number, current: number): ApiError {
  return new ApiError(
    failure(504, 'Timeout', `Timeout: Too large resource version: ${requested}, current: ${current}`, {
      causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }],
      retryAfterSeconds: 1,
    }),
  );
}

export function methodNotAllowed(): ApiError {
  return new ApiError(failure(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource'));
}

export function pathNotFound(): ApiError {
  return new ApiError(failure(404, 'NotFound', 'the server could not find the requested resource'));
}

export function unsupportedMediaType(type: string): ApiError {
  return new ApiError(
    failure(
      415,
      'UnsupportedMediaType',
      `the body of the request was in an unknown format - accepted media types include: application/json, application/merge-patch+json (got ${type})`,
    ),
  );
}

export function unauthorized(): ApiError {
  return new ApiError(failure(401, 'Unauthorized', 'Unauthorized'));
}

export function serviceUnavailable(): ApiError {
  return new ApiError(failure(503, 'ServiceUnavailable', 'the test API server is unavailable (fault injection)'));
}

export function internalError(err: unknown): ApiError {
  return new ApiError(failure(500, 'InternalError', `Internal error occurred: ${err instanceof Error ? err.message : String(err)}`));
}

/** The Status a DELETE answers with for resources that do not return the object. */
export function deleted(r: Resource, name: string, uid: string): Status {
  const details = resourceDetails(r, name);
  details.uid = uid;
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details, code: 200 };
}
