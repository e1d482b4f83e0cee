import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ConvergeError } from '../core/errors.ts';
import { jsonDepthExceeds } from '../core/wire/index.ts';
import { recordBodySize } from './writeLimits.ts';

// What a route reads of a request body, decided from the headers before a byte of it is read
//: a route without a body schema takes none, a route with one takes
// application/json up to its own `bodyLimit` (for a declaration, the store's event limit).

/**
 * Deeper JSON is refused before JSON.parse (10,000 levels overflowed the stack
 * in validation and answered 500). A declaration needs 3 levels around its resources.
 */
export const maxBodyDepth = 128;

const tooLarge = (limit: number, declared: number | null): ConvergeError =>
  new ConvergeError(
    'CONVERGE_ERR_BODY_TOO_LARGE',
    limit === 0 ? 'this route takes no request body' : `request body is over this route's limit of ${limit} bytes`,
    { details: { limit, ...(declared === null ? {} : { declared }) } },
  );

const isJson = (contentType: string): boolean => {
  const semi = contentType.indexOf(';');
  return (semi < 0 ? contentType : contentType.slice(0, semi)).trim().toLowerCase() === 'application/json';
};

/** The request announces a body (a length above 0, or chunked). */
export const announcesBody = (req: FastifyRequest): boolean => {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
};

/**
 * Throws the problem a request's body headers earn on its route (`route`: req.routeOptions,
 * read once by the caller); fastify counts a chunked body against the limit as it arrives.
 */
export function checkBodyHeaders(req: FastifyRequest, route: FastifyRequest['routeOptions']): void {
  if (route.url === undefined) return; // no such route: the 404 says more than a 413 would
  const length = req.headers['content-length'];
  const declared = length === undefined ? null : Number(length);
  if (route.schema?.body === undefined) {
    if (announcesBody(req)) throw tooLarge(0, declared);
    return;
  }
  const limit = route.bodyLimit ?? 0;
  if (declared !== null && declared > limit) throw tooLarge(limit, declared);
  const type = req.headers['content-type'];
  if (type === undefined || !isJson(type))
    throw new ConvergeError(
      'CONVERGE_ERR_UNSUPPORTED_MEDIA_TYPE',
      type === undefined ? 'request body needs content-type: application/json' : `request body is ${type}, not application/json`,
    );
}

/**
 * Replace fastify's parsers with one for JSON that refuses deep nesting first, then parses with
 * fastify's own (which refuses `__proto__` and `constructor.prototype` keys).
 */
export function useJsonBodies(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    const bytes = body as Buffer;
    recordBodySize(req, bytes.length);
    if (jsonDepthExceeds(bytes, maxBodyDepth)) {
      done(new ConvergeError('CONVERGE_ERR_BAD_REQUEST', `request body nests deeper than ${maxBodyDepth} levels`), undefined);
      return;
    }
    void parse(req, bytes.toString('utf8'), done); // fastify's parser answers through done
  });
}

/**
 * An error answered before the body was read leaves the rest of it on the socket: closing the
 * connection stops the upload instead of reading it to keep the connection alive.
 */
export function closeIfBodyUnread(req: FastifyRequest, reply: FastifyReply): void {
  if (announcesBody(req) && !req.raw.readableEnded) reply.header('connection', 'close');
}
