import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { ConvergeError } from '../core/errors.ts';

// Bearer tokens (docs/design.md#7-interfaces-people-and-programs-touch-kept-stable). CONVERGE_API_TOKENS holds entries
// `<token>:<scopes>` separated by `;` (and only `;`), scopes comma-separated from `read` and `send`, e.g.
// `k3l9…:read,send;d4sh…:read`. The token value is the secret itself. Tokens are kept only as
// sha256 digests; logs name a token by the first 8 hex of its digest, never by its value.

export const scopes = ['read', 'send'] as const;
export type Scope = (typeof scopes)[number];

export type TokenEntry = Readonly<{ id: string; scopes: ReadonlySet<Scope> }>;
export type TokenTable = ReadonlyMap<string, TokenEntry>;

const hashToken = (token: string): string => createHash('sha256').update(token, 'utf8').digest('hex');

/** Parse the CONVERGE_API_TOKENS syntax; returns one message per mistake instead of throwing. */
export function parseApiTokens(text: string): { table: TokenTable; errors: string[] } {
  const table = new Map<string, TokenEntry>();
  const errors: string[] = [];
  const entries = text
    .split(';')
    .map((e) => e.trim())
    .filter((e) => e !== '');
  entries.forEach((entry, i) => {
    const colon = entry.lastIndexOf(':');
    const where = `entry ${i + 1}`;
    // A bearer header carries no space, so a token with one could never authenticate: most likely
    // two entries separated by a space. The message does not echo it, as it holds secrets.
    if (colon > 0 && /\s/.test(entry.slice(0, colon))) {
      errors.push(
        `${where}: its token holds a space, which no token can: separate entries with ;, e.g. s3cret-value:read,send;other-value:read`,
      );
      return;
    }
    if (colon <= 0) {
      errors.push(`${where}: expected <token>:<scopes>, e.g. s3cret-value:read,send`);
      return;
    }
    const token = entry.slice(0, colon);
    const wanted = entry
      .slice(colon + 1)
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    if (token.length < 8) errors.push(`${where}: token is shorter than 8 characters`);
    const bad = wanted.filter((s) => !(scopes as readonly string[]).includes(s));
    if (bad.length > 0)
      errors.push(`${where}: unknown scope ${bad.map((b) => JSON.stringify(b)).join(', ')} (scopes: ${scopes.join(', ')})`);
    if (wanted.length === 0) errors.push(`${where}: no scopes (scopes: ${scopes.join(', ')})`);
    const h = hashToken(token);
    if (table.has(h)) errors.push(`${where}: the same token is listed twice`);
    table.set(h, { id: h.slice(0, 8), scopes: new Set(wanted.filter((s): s is Scope => (scopes as readonly string[]).includes(s))) });
  });
  return { table, errors };
}

/**
 * A refusal that carries its RFC 6750 challenge, for the WWW-Authenticate header of the answer:
 * a client told 401 learns which scheme to retry with, and whether its token was the problem.
 */
class BearerRefusal extends ConvergeError {
  constructor(
    code: 'CONVERGE_ERR_UNAUTHENTICATED' | 'CONVERGE_ERR_FORBIDDEN',
    message: string,
    readonly challenge: string,
    details?: Record<string, unknown>,
  ) {
    super(code, message, details === undefined ? undefined : { details });
  }
}

/** The WWW-Authenticate value for an error thrown by `authorize`; null for any other error. */
export const bearerChallenge = (err: unknown): string | null => (err instanceof BearerRefusal ? err.challenge : null);

/**
 * Check a request's Authorization header against the table.
 * With no tokens configured, reads are open and writes are refused (nothing can hold `send`).
 */
export function authorize(table: TokenTable, header: string | undefined, need: Scope): TokenEntry | null {
  if (header === undefined || header === '') {
    if (table.size === 0 && need === 'read') return null;
    throw new BearerRefusal(
      'CONVERGE_ERR_UNAUTHENTICATED',
      need === 'send' && table.size === 0
        ? 'writes need a bearer token and none is configured (CONVERGE_API_TOKENS)'
        : 'this route needs a bearer token',
      'Bearer',
    );
  }
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (m === null)
    throw new BearerRefusal(
      'CONVERGE_ERR_UNAUTHENTICATED',
      'Authorization header is not "Bearer <token>"',
      'Bearer error="invalid_request"',
    );
  const entry = table.get(hashToken(m[1]!));
  if (entry === undefined)
    throw new BearerRefusal('CONVERGE_ERR_UNAUTHENTICATED', 'bearer token is not valid', 'Bearer error="invalid_token"');
  if (!entry.scopes.has(need))
    throw new BearerRefusal(
      'CONVERGE_ERR_FORBIDDEN',
      `token ${entry.id} lacks the ${need} scope`,
      `Bearer error="insufficient_scope", scope="${need}"`,
      { need },
    );
  return entry;
}

/**
 * The onRequest check: it runs before fastify reads a byte of the body, so a
 * client without a valid token costs a header parse, not an upload. Returns the token, if any.
 */
export function authenticate(table: TokenTable, need: Scope | null | undefined, req: FastifyRequest): TokenEntry | null {
  if (need === undefined || need === null) return null;
  return authorize(table, req.headers.authorization, need);
}
