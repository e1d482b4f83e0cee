import pg from 'pg';
import type { ClientConfig, CustomTypesConfig } from 'pg';
import { ConvergeError } from '../../core/errors.ts';
import { splitHosts } from './hosts.ts';
import { checkSchemaName } from './schema.ts';

// How the PostgreSQL adapter connects (./postgresEventStore.ts), shared with the archive move
// (./postgresArchive.ts), which opens connections of its own: the URL and its schema, the type
// parsers, the session settings, and the store's error codes for the server's failures.

/**
 * `postgres://…?schema=name` → the connection string without `schema`, and the schema. Several
 * hosts (`postgres://u@h1:5432,h2:5433/db`, libpq's form, ./hosts.ts) are checked one by one.
 */
export function parsePostgresUrl(url: string): { connectionString: string; schema: string | null } {
  const parsed = splitHosts(url).map((one) => {
    let u: URL;
    try {
      u = new URL(one);
    } catch {
      throw new ConvergeError('CONVERGE_ERR_CONFIG_INVALID', `store url ${JSON.stringify(url)} is not a valid postgres:// URL`);
    }
    if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') {
      throw new ConvergeError('CONVERGE_ERR_CONFIG_INVALID', `store url ${JSON.stringify(url)} is not a postgres:// URL`);
    }
    return u;
  });
  const first = parsed[0]!;
  const schema = first.searchParams.get('schema');
  for (const u of parsed) u.searchParams.delete('schema');
  if (parsed.length === 1) return { connectionString: first.toString(), schema };
  const user = first.username === '' ? '' : `${first.username}${first.password === '' ? '' : `:${first.password}`}@`;
  const hosts = parsed.map((u) => u.host).join(',');
  return { connectionString: `${first.protocol}//${user}${hosts}${first.pathname}${first.search}`, schema };
}

// int8 as bigint (positions, revisions), json left as text: decoded once per event below, with
// the metadata parsed once per distinct text.
export const types: CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
    if (oid === 20) return (v: string) => BigInt(v);
    if (oid === 114) return (v: string) => v;
    return pg.types.getTypeParser(oid, format);
  }) as CustomTypesConfig['getTypeParser'],
};

export const pgError = (err: unknown, what: string): ConvergeError => {
  if (err instanceof ConvergeError) return err;
  const code = (err as { code?: unknown }).code;
  const message = `${what}: ${err instanceof Error ? err.message : String(err)}`;
  // invalid text for a column type: an event id that is not a UUID (docs/design.md#2-events-the-system-of-record makes them UUIDs).
  if (code === '22P02') return new ConvergeError('CONVERGE_ERR_BAD_REQUEST', message, { cause: err });
  return new ConvergeError('CONVERGE_ERR_STORE_UNAVAILABLE', message, { cause: err });
};

/**
 * The server ended this connection (terminated by an operator, a shutdown, an idle-session
 * timeout) or its socket broke. A pool can hand out such a connection before node-postgres has
 * read the server's goodbye, so the statement deserves another try on a fresh one.
 */
export const connectionLost = (err: unknown): boolean => {
  const e = err as { code?: unknown; message?: unknown };
  if (e.code === '57P01' || e.code === '57P02' || e.code === '57P05' || e.code === 'ECONNRESET' || e.code === 'EPIPE') return true;
  return typeof e.message === 'string' && e.message.startsWith('Connection terminated');
};

/** How long the server lets a store session sit idle inside a transaction before ending it (ms). */
export const idleInTransactionMs = 5_000;

// A partition drops packets without a FIN or a RST: a pooled connection that had a statement on the
// wire waits for the kernel's next retransmission, which after a long cut is minutes away (TCP
// backs off to 2 minutes between tries and gives up after about 15), and a pool of such connections
// holds every later statement. The store gives up on them instead (docs/operations.md,
// "PostgreSQL restart and failover").

/**
 * How long a pooled statement may wait for its answer before its connection is dropped (ms):
 * well above the slowest statement the pool runs (a 200,000-event window of `stats`, an append
 * waiting behind another engine's transaction, itself bounded by `idleInTransactionMs`).
 */
export const defaultQueryTimeoutMs = 30_000;
/** How long opening a pooled connection may take (TCP, startup, authentication) before it is given up (ms). */
export const defaultConnectTimeoutMs = 10_000;
/** TCP keepalive on pooled connections, as on the lease's (./lease.ts): an idle connection whose peer vanished is noticed. */
export const keepAliveInitialDelayMs = 5_000;

/** node-postgres's error for a statement that passed `query_timeout`: its connection is dead or stuck. */
export const queryTimedOut = (err: unknown): boolean => err instanceof Error && err.message === 'Query read timeout';

/**
 * `Client` with a bound on opening a connection. pg.Pool's own `connectionTimeoutMillis` would
 * also bound the wait for a free pooled connection, which a busy pool may legitimately take longer.
 */
export const connectingWithin = (Client: typeof pg.Client, ms: number): typeof pg.Client =>
  class extends Client {
    constructor(config?: string | ClientConfig) {
      super({ ...(typeof config === 'string' ? { connectionString: config } : config), connectionTimeoutMillis: ms });
    }
  };

/** The schema a store URL (and options) name, and the config every connection to it is made with. */
export function postgresConnection(
  url: string,
  options: Readonly<{ schema?: string; applicationName?: string }> = {},
): { schema: string; clientConfig: ClientConfig } {
  const parsed = parsePostgresUrl(url);
  const schema = checkSchemaName(options.schema ?? parsed.schema ?? 'converge');
  // Generic plans for every prepared statement: they are all simple, and the append's custom
  // plan cost ~0.1–0.5 ms of planning on every call (EXPLAIN ANALYZE, batches of 100), since the
  // server kept choosing custom plans for it.
  // An append holds the position counter's row lock from BEGIN to COMMIT over several round trips:
  // an engine cut off mid-append (a partition: no FIN, no RST) would hold it, and every engine's
  // appends, until the server noticed the session was dead — TCP keepalive, hours by default. The
  // server ends a session idle inside a transaction past this bound instead (docs/operations.md,
  // "Scaling out").
  const clientConfig: ClientConfig = {
    connectionString: parsed.connectionString,
    application_name: options.applicationName ?? 'converge',
    types,
    options: `-c plan_cache_mode=force_generic_plan -c idle_in_transaction_session_timeout=${idleInTransactionMs}`,
  };
  return { schema, clientConfig };
}

/**
 * The store's pool of `max` connections of `Client` (its connect bounded: connectingWithin), each
 * statement bounded as above so that a connection a partition left hanging frees its slot.
 */
export const boundedPool = (
  clientConfig: ClientConfig,
  Client: typeof pg.Client,
  max: number,
  bounds: Readonly<{ queryTimeoutMs?: number }>,
): pg.Pool =>
  new pg.Pool({
    ...clientConfig,
    Client,
    max,
    query_timeout: bounds.queryTimeoutMs ?? defaultQueryTimeoutMs,
    keepAlive: true,
    keepAliveInitialDelayMillis: keepAliveInitialDelayMs,
  });
