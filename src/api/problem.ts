import type { FastifyReply } from 'fastify';
import { errorCodes, isConvergeError, toConvergeError } from '../errors.ts';
import type { ConvergeError, ErrorCode } from '../errors.ts';

// RFC 9457 problem details. `code` is the stable registry code (src/errors.ts); `type` names it
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

/** Map anything thrown in a route (ours or fastify's own) to a ConvergeError. */
export function classify(err: unknown): ConvergeError {
  if (isConvergeError(err)) return err;
  const status = (err as { statusCode?: unknown }).statusCode;
  const fastifyCode = (err as { code?: unknown }).code;
  if (status === 413) return toConvergeError(err, 'CONVERGE_ERR_BODY_TOO_LARGE');
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return toConvergeError(err, 'CONVERGE_ERR_BAD_REQUEST');
  }
  if (fastifyCode === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return toConvergeError(err, 'CONVERGE_ERR_BAD_REQUEST');
  return toConvergeError(err, 'CONVERGE_ERR_INTERNAL');
}

export function sendProblem(reply: FastifyReply, problem: Problem): FastifyReply {
  return reply.code(problem.status).type('application/problem+json').send(problem);
}
