import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ConvergeError } from '../core/errors.ts';

// What one caller may make the engine write (docs/operations.md#configuration): declarations in one
// bulk call, and bytes of request bodies a minute per token on the write routes. The byte rate is
// a token bucket per API token on a monotonic clock (a wall clock set back must not refill it):
// it holds a minute's bytes, refills evenly, and a body bigger than what is left waits.

export type WriteLimits = Readonly<{
  /** Items in one POST /v1/declarations. */
  maxBulkDeclarations: number;
  /** Bytes of request bodies one token may send to write routes in a minute. */
  maxBytesPerTokenPerMinute: number;
}>;

/**
 * serve's defaults: 1,000 declarations is what the bulk route always took; 256 MiB a minute is far
 * past a fleet's rollouts (a 1,000-node wave of 16 KiB specs is 16 MiB) and stops a loop posting
 * the largest bodies.
 */
export const defaultWriteLimits: WriteLimits = { maxBulkDeclarations: 1_000, maxBytesPerTokenPerMinute: 256 * 1024 * 1024 };

const minuteMs = 60_000;

export type ByteRate = Readonly<{
  /** Throws 429 CONVERGE_ERR_CLIENT_OVER_RATE when `bytes` more is past what `client` has left. */
  check: (client: string, bytes: number) => void;
  /** Count bytes that were accepted; the bucket may go below zero (a chunked body's size is known late). */
  charge: (client: string, bytes: number) => void;
}>;

export function createByteRate(maxPerMinute: number, now: () => number): ByteRate {
  const buckets = new Map<string, { level: number; at: number }>();
  const perMs = maxPerMinute / minuteMs;
  const bucketOf = (client: string) => {
    const t = now();
    const b = buckets.get(client) ?? { level: maxPerMinute, at: t };
    b.level = Math.min(maxPerMinute, b.level + (t - b.at) * perMs);
    b.at = t;
    // A full bucket holds nothing worth keeping: the map stays as small as the busy tokens.
    if (b.level >= maxPerMinute) buckets.delete(client);
    else buckets.set(client, b);
    return b;
  };
  return {
    check(client, bytes) {
      const b = bucketOf(client);
      if (bytes <= b.level && b.level > 0) return;
      const used = Math.round(maxPerMinute - b.level);
      // A body larger than the whole minute never fits: say so with the full minute.
      const waitMs = bytes > maxPerMinute ? minuteMs : Math.min(minuteMs, (Math.max(bytes, 1) - b.level) / perMs);
      const retryAfterSeconds = Math.max(1, Math.ceil(waitMs / 1000));
      throw new ConvergeError(
        'CONVERGE_ERR_CLIENT_OVER_RATE',
        `${client} sent ${used} bytes of request bodies in the last minute; ${bytes} more is past --max-bytes-per-token-per-minute (${maxPerMinute})`,
        { details: { limit: 'max-bytes-per-token-per-minute', max: maxPerMinute, got: used + bytes, retryAfterSeconds } },
      );
    },
    charge(client, bytes) {
      const b = bucketOf(client);
      b.level -= bytes;
      buckets.set(client, b);
    },
  };
}

/** The declared body length, or null for a chunked body (or none). */
const declaredLength = (req: FastifyRequest): number | null => {
  const n = Number(req.headers['content-length']);
  return Number.isSafeInteger(n) && n >= 0 ? n : null;
};

/**
 * The onRequest step for a write route (after the token, before the body): refuse a body the
 * token's minute has no room for, before reading it. A chunked body is let in while the token has
 * any room left and charged once read (`chargeBody`).
 */
export function checkWriteRate(rate: ByteRate, client: string, req: FastifyRequest, reply: FastifyReply): void {
  try {
    rate.check(client, declaredLength(req) ?? 0);
  } catch (err) {
    const seconds = (err as ConvergeError).details?.['retryAfterSeconds'];
    reply.header('retry-after', String(seconds));
    throw err;
  }
}

/** The bytes a request's body held as received, recorded by the JSON parser (bodyPolicy.ts). */
const bodySizes = new WeakMap<FastifyRequest, number>();
export const recordBodySize = (req: FastifyRequest, bytes: number): void => void bodySizes.set(req, bytes);

/** Charge every write route's body, once read, to its token (`tokenOf`: null for a route that is not one). */
export function chargeBodies(app: FastifyInstance, rate: ByteRate, tokenOf: (req: FastifyRequest) => string | null): void {
  app.addHook('preValidation', (req, _reply, done) => {
    const token = tokenOf(req);
    const bytes = bodySizes.get(req) ?? declaredLength(req) ?? 0;
    if (token !== null && bytes > 0) rate.charge(token, bytes);
    done();
  });
}

/** The bulk route's preValidation step: count the items before zod checks each of them. */
export function checkBulkSize(max: number, body: unknown): void {
  if (!Array.isArray(body) || body.length <= max) return;
  throw new ConvergeError(
    'CONVERGE_ERR_BAD_REQUEST',
    `the body holds ${body.length} declarations, past --max-bulk-declarations (${max}); send them in several calls`,
    { details: { limit: 'max-bulk-declarations', max, got: body.length } },
  );
}
