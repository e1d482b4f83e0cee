import pg from 'pg';
import type { ClientConfig } from 'pg';
import { ConvergeError } from '../../core/errors.ts';

// Several hosts in one store URL, as libpq writes them (`postgres://user@h1:5432,h2:5433/db`):
// a primary and its standbys. node-postgres connects to one host only, so every connection the
// store opens (pool, LISTEN, leases) goes through `clientFor`, which connects to the host last
// found writable and, once that host has failed a connect or turned out read-only, looks again:
// each host in turn from the last good one, the first that answers `pg_is_in_recovery()` false
// wins — what libpq's `target_session_attrs=read-write` does. A promoted standby is thus found on
// the next connection after the primary goes. Which host is primary is decided by the operator's
// failover, never here: the old primary must not come back writable (docs/operations.md,
// "PostgreSQL restart and failover").

export type Host = Readonly<{ host: string; port: number }>;

/**
 * libpq's multi-host URL → one connection string per host (the rest of the URL, user, password,
 * database and parameters, the same for each). A URL with one host comes back as it was.
 */
export function splitHosts(connectionString: string): string[] {
  const m = /^(postgres(?:ql)?:\/\/)([^@/?#]*@)?([^/?#]*)(.*)$/s.exec(connectionString);
  if (m === null || !m[3]!.includes(',')) return [connectionString];
  const hosts = m[3]!.split(',');
  if (hosts.some((h) => h === ''))
    throw new ConvergeError('CONVERGE_ERR_CONFIG_INVALID', `store url lists an empty host: ${JSON.stringify(m[3])}`);
  return hosts.map((h) => `${m[1]!}${m[2] ?? ''}${h}${m[4]!}`);
}

/** A connection's wait for a host that does not answer at all (a dead host's SYN goes unanswered). */
const probeTimeoutMs = 5_000;

/** The client class every connection of one store uses: plain `pg.Client` for one host, else one that finds the writable host. */
export function clientFor(base: ClientConfig): typeof pg.Client {
  const urls = splitHosts(base.connectionString ?? '');
  if (urls.length === 1) return pg.Client;
  const configs = urls.map((connectionString) => ({ ...base, connectionString }));
  // Parsed as pg parses them (a client that never connects), so every URL form pg takes works.
  const hosts: Host[] = configs.map((c) => {
    const parsed = new pg.Client(c);
    return { host: parsed.host, port: parsed.port };
  });
  /** The host last found writable; null: look again before the next connection. */
  let current: number | null = null;
  let last = 0;
  let looking: Promise<number> | null = null;

  const isWritable = async (i: number): Promise<boolean> => {
    const c = new pg.Client({ ...configs[i]!, connectionTimeoutMillis: probeTimeoutMs });
    c.on('error', () => undefined);
    try {
      await c.connect();
      const r = await c.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r');
      return r.rows[0]?.r === false;
    } catch {
      return false;
    } finally {
      await c.end().catch(() => undefined);
    }
  };
  const find = async (): Promise<number> => {
    for (let k = 0; k < configs.length; k++) {
      const i = (last + k) % configs.length;
      if (await isWritable(i)) return i;
    }
    throw new Error(`no writable PostgreSQL among ${urls.length} hosts (each refused, timed out or is in recovery)`);
  };
  const writable = async (): Promise<number> => {
    if (current !== null) return current;
    looking ??= find().finally(() => (looking = null));
    const i = await looking;
    current = last = i;
    return i;
  };
  const lost = (i: number): void => {
    if (current === i) current = null;
  };

  return class WritableHostClient extends pg.Client {
    // Constructed with the store's config (the pool passes its own): every host shares the rest of the URL.
    constructor(config?: ClientConfig) {
      super({ ...config, connectionString: urls[0]! });
    }

    // pg.Client reads host and port when it connects, so they can be set to the host found until then.
    override connect(): Promise<pg.Client>;
    override connect(callback: (err: Error) => void): void;
    override connect(callback?: (err: Error) => void): Promise<pg.Client> | void {
      const done = (async (): Promise<pg.Client> => {
        const i = await writable();
        this.host = hosts[i]!.host;
        this.port = hosts[i]!.port;
        this.on('error', () => lost(i));
        try {
          await super.connect();
          // The host found may have changed since it was probed: check on this connection itself.
          const r = await this.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r');
          if (r.rows[0]?.r !== false) throw new Error(`PostgreSQL at ${hosts[i]!.host}:${hosts[i]!.port} is in recovery (read-only)`);
          return this;
        } catch (err) {
          lost(i);
          await this.end().catch(() => undefined);
          throw err;
        }
      })();
      if (callback === undefined) return done;
      done.then(
        () => callback(null as unknown as Error),
        (err: Error) => callback(err),
      );
    }
  };
}
