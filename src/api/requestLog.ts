import { LogController } from 'fastify';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { RouteKind } from './routeOptions.ts';

// fastify logged every request, probes included, at info with every header. Here a
// request is two lines (incoming, completed) with method, URL, address and status, and probes
// are logged at debug so a scraper every few seconds does not drown the log. Headers are never
// logged: the Authorization header is a credential, and the others are rarely worth their size.

const maxUrlInLog = 512;

// A token in the query string (`?access_token=`, `?token=`) is a credential like the header: no
// route accepts one, but a client that tries must not leave its secret in the log. The name stays
// so the line still says what was tried.
const tokenInQuery = /([?&](?:access_token|token)=)[^&#]*/gi;

/** The URL as logged: query tokens redacted, then cut at the length limit. */
export function urlForLog(url: string): string {
  const redacted = url.includes('?') ? url.replace(tokenInQuery, '$1[redacted]') : url;
  return redacted.length > maxUrlInLog ? `${redacted.slice(0, maxUrlInLog)}…` : redacted;
}

export const requestSerializers = {
  req: (req: FastifyRequest) => ({
    method: req.method,
    url: urlForLog(req.url),
    remoteAddress: req.ip,
  }),
  res: (reply: FastifyReply) => ({ statusCode: reply.statusCode }),
};

export const logLevelOf = (kind: RouteKind | undefined): 'debug' | 'info' => (kind === 'probe' ? 'debug' : 'info');

// buildApp gives fastify a pino logger, so req.log is one. A logger above info logs no request
// line, and then the route is not even looked up (req.routeOptions builds an object per read).
function levelFor(req: FastifyRequest): 'debug' | 'info' | null {
  const log = req.log as Logger;
  if (!log.isLevelEnabled('info')) return null; // nor debug, below it
  const level = logLevelOf(req.routeOptions.config.kind);
  return log.isLevelEnabled(level) ? level : null;
}

/** fastify's own request log lines, at the level of the route's kind. */
export class RequestLog extends LogController {
  override incomingRequest(req: FastifyRequest): void {
    const level = levelFor(req);
    if (level !== null) req.log[level]({ req }, 'incoming request');
  }

  override requestCompleted(error: Error | null | undefined, req: FastifyRequest, reply: FastifyReply): void {
    // req.log, not reply.log: it carries the token id once onRequest has checked it.
    if (error) {
      req.log.error({ res: reply, err: error, responseTime: reply.elapsedTime }, 'request errored');
      return;
    }
    const level = levelFor(req);
    if (level !== null) req.log[level]({ res: reply, responseTime: reply.elapsedTime }, 'request completed');
  }
}
