import type pg from 'pg';
import type { ClientConfig } from 'pg';
import { createBackoff, sleep } from '../../retry.ts';
import type { LeaseHold } from '../port.ts';

// A lease across every engine on one PostgreSQL store, with a liveness bound of its own
// (docs/operations.md, "Leases"). A row per lease in `<schema>.leases` holds its generation (the
// fencing token: one more at every change of holder), a beat the holder moves every ttl/3, and the
// holder's backend. A standby reads the row every retryMs and takes the lease — by a compare-and-set
// on (generation, beat) — when it is free, when the holder's backend is gone (its process died:
// at once, as the advisory lock this replaces did), or when the beat has not moved for ttl by the
// standby's own monotonic clock (the holder is frozen or cut off but its session lives: a
// SIGSTOPped holder kept an advisory lock, and the fleet, for as long as it was stopped).
//
// The holder counts itself the holder only until 2/3 of ttl after it sent its last renewal that
// the server took, on its monotonic clock; a standby takes over no sooner than ttl after it saw that
// beat, which was after it was sent. So the two overlap only if their monotonic clocks' rates differ
// by a third, and never when the old one was frozen: it wakes past its bound. Every clock here is
// monotonic (performance.now); the wall clocks of engine and server are never compared.

export type LeaseOptions = Readonly<{
  /** How often a waiting engine reads the lease (ms). */
  retryMs?: number;
  /** A standby takes a lease whose beat has not moved for this long (ms); the holder renews every third of it. */
  ttlMs?: number;
  /** For tests: the monotonic clock (ms). */
  monotonic?: () => number;
}>;

export const defaultLeaseTtlMs = 10_000;

type Row = { generation: string; beat: string; free: boolean; gone: boolean };

export function acquirePostgresLease(
  Client: typeof pg.Client,
  config: ClientConfig,
  schema: string,
  name: string,
  signal: AbortSignal,
  options: LeaseOptions = {},
): Promise<LeaseHold | null> {
  const retryMs = options.retryMs ?? 500;
  const ttlMs = options.ttlMs ?? defaultLeaseTtlMs;
  const monotonic = options.monotonic ?? (() => performance.now());
  const backoff = createBackoff({ minMs: retryMs, maxMs: 5_000, jitter: 0.3 });
  const table = `${schema}.leases`;
  return (async () => {
    while (!signal.aborted) {
      // A lease statement answered later than ttl is worth nothing: the holder counts itself out
      // at 2/3 of it, and a standby cannot judge a beat it cannot read. A connection gone dark (a
      // partition: no FIN, no RST) is given up at that bound and opened again, not waited on for minutes.
      const client = new Client({ ...config, keepAlive: true, keepAliveInitialDelayMillis: 5_000, query_timeout: ttlMs });
      let gone: () => void = () => undefined;
      const lost = new Promise<void>((resolve) => (gone = resolve));
      client.on('error', () => gone());
      client.on('end', () => gone());
      try {
        await client.connect();
        backoff.reset();
        await client.query(`INSERT INTO ${table} (name, generation, beat) VALUES ($1, 0, 0) ON CONFLICT (name) DO NOTHING`, [name]);
        /** The beat last seen, and when it was first seen (monotonic). */
        let seen: { generation: string; beat: string; since: number } | null = null;
        while (!signal.aborted) {
          const r = await client.query<Row>(
            `SELECT generation::text, beat::text, holder_pid IS NULL AS free,
                    (holder_pid IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a
                       WHERE a.pid = l.holder_pid AND a.backend_start = l.holder_start)) AS gone
               FROM ${table} l WHERE name = $1`,
            [name],
          );
          const row = r.rows[0];
          if (row === undefined) throw new Error(`lease ${name} has no row`);
          const t = monotonic();
          if (seen === null || seen.generation !== row.generation || seen.beat !== row.beat) seen = { ...row, since: t };
          if (row.free || row.gone || t - seen.since >= ttlMs) {
            const taken = await client.query<{ generation: string }>(
              `UPDATE ${table} SET generation = generation + 1, beat = 0, holder_pid = pg_backend_pid(),
                      holder_start = (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid())
                WHERE name = $1 AND generation = $2 AND beat = $3 RETURNING generation::text`,
              [name, row.generation, row.beat],
            );
            const generation = taken.rows[0]?.generation;
            const takenFrom = row.free ? 'free' : row.gone ? 'gone' : 'stale';
            if (generation !== undefined) return hold(client, table, name, BigInt(generation), lost, gone, ttlMs, monotonic, t, takenFrom);
            seen = null;
          }
          await Promise.race([sleep(retryMs, signal), lost]);
        }
      } catch {
        // the server is away or the connection dropped while waiting: start over on a new one
      }
      await client.end().catch(() => undefined);
      if (!signal.aborted) await sleep(backoff.next(), signal);
    }
    return null;
  })();
}

function hold(
  client: pg.Client,
  table: string,
  name: string,
  generation: bigint,
  lost: Promise<void>,
  gone: () => void,
  ttlMs: number,
  monotonic: () => number,
  takenAt: number,
  takenFrom: 'free' | 'gone' | 'stale',
): LeaseHold {
  let released = false;
  let ended = false;
  /** Until when (monotonic) this process may act as the holder: 2/3 ttl after the last renewal the server took was sent. */
  let validUntil = takenAt + (ttlMs * 2) / 3;
  const end = (): void => {
    ended = true;
    clearTimeout(timer);
    clearTimeout(expiry);
    gone();
  };
  /** Lost once the bound passes with no renewal taken, even while one hangs. */
  const watch = (): NodeJS.Timeout => {
    const t = setTimeout(() => (monotonic() >= validUntil ? end() : (expiry = watch())), Math.max(0, validUntil - monotonic()));
    t.unref();
    return t;
  };
  const renew = async (): Promise<void> => {
    const sent = monotonic();
    try {
      const r = await client.query(
        `UPDATE ${table} SET beat = beat + 1 WHERE name = $1 AND generation = $2 AND holder_pid = pg_backend_pid()`,
        [name, String(generation)],
      );
      if (r.rowCount !== 1) return end();
      // A renewal that took longer than the bound is no renewal: a standby may have counted it out.
      if (monotonic() > validUntil) return end();
      validUntil = sent + (ttlMs * 2) / 3;
    } catch {
      return end();
    }
    if (!ended && !released) schedule();
  };
  let timer: NodeJS.Timeout | undefined;
  const schedule = (): void => {
    timer = setTimeout(() => void renew(), ttlMs / 3);
    timer.unref();
  };
  schedule();
  let expiry = watch();
  void lost.then(() => {
    ended = true;
    clearTimeout(timer);
    clearTimeout(expiry);
  });
  const valid = (): boolean => !ended && !released && monotonic() < validUntil;
  return {
    lost: lost.then(() => (released ? new Promise<void>(() => undefined) : undefined)),
    generation,
    takenFrom,
    valid,
    current: async () => {
      if (!valid()) return false;
      const r = await client
        .query(`SELECT 1 FROM ${table} WHERE name = $1 AND generation = $2 AND holder_pid = pg_backend_pid()`, [name, String(generation)])
        .catch(() => null);
      if (r === null || r.rowCount !== 1) {
        end();
        return false;
      }
      return valid();
    },
    release: async () => {
      if (released) return;
      released = true;
      clearTimeout(timer);
      clearTimeout(expiry);
      await client
        .query(`UPDATE ${table} SET holder_pid = NULL, holder_start = NULL WHERE name = $1 AND generation = $2`, [name, String(generation)])
        .catch(() => undefined);
      await client.end().catch(() => undefined);
    },
  };
}
