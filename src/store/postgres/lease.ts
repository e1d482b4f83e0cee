import pg from 'pg';
import type { ClientConfig } from 'pg';
import { createBackoff, sleep } from '../../retry.ts';
import type { LeaseHold } from '../port.ts';

// A lease across every engine on one PostgreSQL store: a session-level advisory lock
// taken on a connection of its own and held for as long as that connection lives. If the holder
// dies (SIGKILL, power loss), the server ends its session and the lock with it, and the next
// engine's try succeeds: no expiry to tune, no clock to trust. The holder learns it lost the lease
// when its connection errors or a heartbeat fails; until then (a network partition, up to the
// server's TCP keepalive) both may act, which is why the relay's delivery stays at-least-once.

export type LeaseOptions = Readonly<{
  /** How often a waiting engine tries again (ms). */
  retryMs?: number;
  /** How often the holder checks its connection (ms). */
  heartbeatMs?: number;
}>;

export function acquirePostgresLease(
  config: ClientConfig,
  key: string,
  signal: AbortSignal,
  options: LeaseOptions = {},
): Promise<LeaseHold | null> {
  const retryMs = options.retryMs ?? 500;
  const heartbeatMs = options.heartbeatMs ?? 2_000;
  const backoff = createBackoff({ minMs: retryMs, maxMs: 5_000, jitter: 0.3 });
  return (async () => {
    while (!signal.aborted) {
      const client = new pg.Client({ ...config, keepAlive: true, keepAliveInitialDelayMillis: 5_000 });
      let gone: () => void = () => undefined;
      const lost = new Promise<void>((resolve) => (gone = resolve));
      client.on('error', () => gone());
      client.on('end', () => gone());
      try {
        await client.connect();
        backoff.reset();
        while (!signal.aborted) {
          const r = await client.query<{ held: boolean }>('SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS held', [key]);
          if (r.rows[0]?.held === true) return hold(client, key, lost, gone, heartbeatMs);
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

function hold(client: pg.Client, key: string, lost: Promise<void>, gone: () => void, heartbeatMs: number): LeaseHold {
  let released = false;
  // A half-open connection errors only on use: ask the server now and then.
  const beat = setInterval(() => {
    client.query('SELECT 1').catch(() => gone());
  }, heartbeatMs);
  beat.unref();
  void lost.then(() => clearInterval(beat));
  return {
    lost: lost.then(() => (released ? new Promise<void>(() => undefined) : undefined)),
    release: async () => {
      if (released) return;
      released = true;
      clearInterval(beat);
      await client.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [key]).catch(() => undefined);
      await client.end().catch(() => undefined);
    },
  };
}
