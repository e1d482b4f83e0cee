import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { describeOnService, once, probeWithRetries } from './services.ts';
import type { Probe } from './services.ts';

// What every test against the real PostgreSQL needs: is the server there (./services.ts: fail
// under CONVERGE_REQUIRE_BROKER=1, which CI sets for every external service, else skip loudly),
// and a scratch schema of its own, dropped afterwards, so runs never see each other's events.

export const postgresTestUrl = process.env['CONVERGE_TEST_POSTGRES_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';

/**
 * Whether PostgreSQL answers at `url`, in up to three attempts: the probe starts when a suite
 * registers, and a hook that holds the event loop meanwhile (a synchronous build) lets an attempt's
 * connect timeout fire before its answer is read; a server that is down fails all three.
 */
export const probePostgres = (url = postgresTestUrl): ReturnType<Probe> => probeWithRetries(3, () => probeOnceAt(url));

async function probeOnceAt(url: string): ReturnType<Probe> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return { ok: true };
  } catch (err) {
    return { ok: false, reason: `${url}: ${err instanceof Error ? err.message : String(err)}` };
  } finally {
    await client.end().catch(() => undefined);
  }
}
const probeOnce = once(() => probePostgres());

/** `describe(name, body)` when PostgreSQL answers; a failing test under CONVERGE_REQUIRE_BROKER=1, else a loud skip. */
export const describeOnPostgres = (name: string, body: () => void | Promise<void>): void =>
  describeOnService('PostgreSQL', probeOnce, name, body);

export type ScratchSchema = Readonly<{ schema: string; url: string; drop: () => Promise<void> }>;

/** A fresh schema name and the store URL naming it; `drop` removes it and everything in it. */
export function scratchSchema(prefix = 'converge_test'): ScratchSchema {
  const schema = `${prefix}_${randomBytes(4).toString('hex')}`;
  const url = new URL(postgresTestUrl);
  url.searchParams.set('schema', schema);
  return {
    schema,
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: postgresTestUrl });
      client.on('error', () => undefined);
      await client.connect();
      try {
        await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      } finally {
        await client.end();
      }
    },
  };
}

/** Run one statement on the test database on a connection of its own (a test's surgery on a store). */
export async function runSql(text: string): Promise<void> {
  const client = new pg.Client({ connectionString: postgresTestUrl });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}
