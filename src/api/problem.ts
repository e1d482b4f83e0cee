import type { FastifyReply } from 'fastify';
import { ConvergeError, errorCodes, isConvergeError, toConvergeError } from '../core/errors.ts';
import type { ErrorCode } from '../core/errors.ts';

// RFC 9457 problem details. `code` is the stable registry code (src/core/errors.ts); `type` names it
// as a URN so clients can switch on either without parsing `detail`, which is for people.

export type Problem = Readonly<{
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ErrorCode;
  instance?: string;
  details?: Readonly<Record<string, unknown>>;
}>;

export function problemOf(err: ConvergeError, instance?: string): Problem {
  const entry = errorCodes[err.code];
  return {
    type: `urn:converge:error:${err.code}`,
    title: entry.summary,
    status: entry.http,
    detail: err.message,
    code: err.code,
    ...(instance === undefined ? {} : { instance }),
    ...(err.details === undefined ? {} : { details: err.details }),
  };
}

type ValidationIssue = Readonly<{ instancePath?: string; message?: string }>;
type FastifyValidationError = Readonly<{ validation: readonly ValidationIssue[]; validationContext?: string }>;

const isValidationError = (err: unknown): err is FastifyValidationError =>
  typeof err === 'object' && err !== null && Array.isArray((err as { validation?: unknown }).validation);

/** The type provider's zod issues, named the way clients see the request: `query.status: …`. */
function validationProblem(err: FastifyValidationError): ConvergeError {
  const where = err.validationContext === 'querystring' ? 'query' : (err.validationContext ?? 'request');
  const issues = err.validation.slice(0, 5).map((i) => ({
    path: [where, ...(i.instancePath ?? '').split('/').filter((p) => p !== '')].join('.'),
    message: i.message ?? 'invalid',
  }));
  return new ConvergeError('CONVERGE_ERR_BAD_REQUEST', issues.map((i) => `${i.path}: ${i.message}`).join('; '), {
    details: { issues },
    cause: err,
  });
}

/** Map anything thrown in a route (ours or fastify's own) to a ConvergeError. */
export function classify(err: unknown): ConvergeError {
  if (isConvergeError(err)) return err;
  if (isValidationError(err)) return validationProblem(err);
  const status = (err as { statusCode?: unknown }).statusCode;
  if (status === 413) return toConvergeError(err, 'CONVERGE_ERR_BODY_TOO_LARGE');
  if (status === 414) return toConvergeError(err, 'CONVERGE_ERR_URI_TOO_LONG');
  if (status === 415) return toConvergeError(err, 'CONVERGE_ERR_UNSUPPORTED_MEDIA_TYPE');
  if (typeof status === 'number' && status >= 400 && status < 500) return toConvergeError(err, 'CONVERGE_ERR_BAD_REQUEST');
  return toConvergeError(err, 'CONVERGE_ERR_INTERNAL');
}

/**
 * Errors fastify raises before a route is found (fastify's `frameworkErrors`). Its own answers
 * were plain JSON that echoed the URL; these are problems that do not.
 */
export function frameworkProblem(err: unknown): ConvergeError {
  const code = (err as { code?: unknown }).code;
  if (code === 'FST_ERR_MAX_PARAM_LENGTH')
    return new ConvergeError('CONVERGE_ERR_URI_TOO_LONG', 'a path segment of the URL is longer than the limit', { cause: err });
  if (code === 'FST_ERR_BAD_URL') return new ConvergeError('CONVERGE_ERR_BAD_REQUEST', 'the URL path does not decode', { cause: err });
  return classify(err);
}

export function sendProblem(reply: FastifyReply, problem: Problem): FastifyReply {
  return reply.code(problem.status).type('application/problem+json').send(problem);
}
