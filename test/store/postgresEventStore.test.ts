import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, test } from 'node:test';
import pg from 'pg';
import { loadConfig } from '../../src/app/config.ts';
import { isConvergeError } from '../../src/core/errors.ts';
import type { ErrorCode } from '../../src/core/errors.ts';
import type { Recorded } from '../../src/core/events/index.ts';
import { createPostgresEventStore, postgresSchemaVersion } from '../../src/store/postgres/index.ts';
import { openEventStore } from '../../src/store/index.ts';
import type { EventStore } from '../../src/store/index.ts';
import { describeOnPostgres, postgresTestUrl, scratchSchema } from '../support/postgres.ts';
import { until } from '../support/until.ts';
import type { ScratchSchema } from '../support/postgres.ts';

// What the conformance suite cannot say about the PostgreSQL adapter: the URL and config, the
// schema guard, wake-ups across handles through LISTEN/NOTIFY (and after that connection is
// lost), and errors that name the cause.

const alive = (node: string, id: string = randomUUID()) => ({
  id,
  type: 'AliveSeen' as const,
  data: { node, seenAt: '2024-01-01T00:00:00.000Z' },
});

async function rejectsWith(p: Promise<unknown>, code: ErrorCode, message?: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(isConvergeError(err, code), `expected ${code}, got ${String(err)}`);
    if (message !== undefined) assert.match((err as Error).message, message);
    return true;
  });
}

test('--store / CONVERGE_STORE accept postgres:// and postgresql:// URLs', () => {
  for (const store of ['postgres://u@db:5432/converge', 'postgresql://u@db/converge?schema=fleet_a']) {
    assert.equal(loadConfig({ flags: {}, env: { CONVERGE_STORE: store } }).store, store);
  }
  assert.throws(
    () => loadConfig({ flags: { store: 'mysql://u@db/x' }, env: {} }),
    (err: unknown) => isConvergeError(err, 'CONVERGE_ERR_CONFIG_INVALID') && /postgres:\/\//.test((err as Error).message),
  );
});

test('--role / CONVERGE_ROLE take all (the default) or api, and nothing else', () => {
  assert.equal(loadConfig({ flags: {}, env: {} }).role, 'all');
  assert.equal(loadConfig({ flags: { role: 'api' }, env: {} }).role, 'api');
  assert.equal(loadConfig({ flags: {}, env: { CONVERGE_ROLE: 'api' } }).role, 'api');
  assert.throws(
    () => loadConfig({ flags: { role: 'relay' }, env: {} }),
    (err: unknown) =>
      isConvergeError(err, 'CONVERGE_ERR_CONFIG_INVALID') && /--role \/ CONVERGE_ROLE: must be all or api/.test((err as Error).message),
  );
});

test('a schema name that is not a plain identifier is refused before connecting', () => {
  assert.throws(
    () => createPostgresEventStore('postgres://u@127.0.0.1:1/x?schema=Robert%27)%3B--'),
    (err: unknown) => isConvergeError(err, 'CONVERGE_ERR_CONFIG_INVALID'),
  );
});

test('a server that cannot be reached is STORE_UNAVAILABLE', async () => {
  const store = createPostgresEventStore('postgres://postgres@127.0.0.1:1/test');
  try {
    await rejectsWith(store.headPosition(), 'CONVERGE_ERR_STORE_UNAVAILABLE', /ECONNREFUSED|connect/);
  } finally {
    await store.close();
  }
});

describeOnPostgres('PostgreSQL store against the server', () => {
  const admin = new pg.Pool({ connectionString: postgresTestUrl, max: 2 });
  admin.on('error', () => undefined);
  const scratches: ScratchSchema[] = [];
  const fresh = (): ScratchSchema => {
    const s = scratchSchema('converge_pgstore');
    scratches.push(s);
    return s;
  };
  after(async () => {
    for (const s of scratches) await s.drop();
    await admin.end();
  });
  const withStore = (url: string, fn: (store: EventStore) => Promise<void>, options = {}) =>
    (async () => {
      const store = createPostgresEventStore(url, options);
      try {
        await fn(store);
      } finally {
        await store.close();
      }
    })();

  void test('openEventStore opens postgres:// URLs with the adapter, in the schema the URL names', async () => {
    const s = fresh();
    const store = await openEventStore(s.url);
    try {
      assert.equal(store.kind, 'postgres');
      await store.append([{ stream: 'node-a', expected: 'no_stream', events: [alive('a')] }]);
      const n = await admin.query(`SELECT count(*)::int AS n FROM ${s.schema}.events`);
      assert.equal(n.rows[0].n, 1);
    } finally {
      await store.close();
    }
  });

  void test('a schema written by a newer Converge is refused with STORE_SCHEMA', async () => {
    const s = fresh();
    await withStore(s.url, async (store) => void (await store.headPosition()));
    await admin.query(`UPDATE ${s.schema}.meta SET value = $1 WHERE key = 'schema_version'`, [String(postgresSchemaVersion + 1)]);
    await withStore(s.url, (store) => rejectsWith(store.headPosition(), 'CONVERGE_ERR_STORE_SCHEMA', /newer Converge/));
  });

  void test('a schema that holds other tables is refused, not altered', async () => {
    const s = fresh();
    await admin.query(`CREATE SCHEMA ${s.schema}; CREATE TABLE ${s.schema}.something_else (x int)`);
    await withStore(s.url, (store) => rejectsWith(store.headPosition(), 'CONVERGE_ERR_STORE_SCHEMA', /not a Converge event store/));
    const tables = await admin.query('SELECT table_name FROM information_schema.tables WHERE table_schema = $1', [s.schema]);
    assert.deepEqual(
      tables.rows.map((r: { table_name: string }) => r.table_name),
      ['something_else'],
    );
  });

  void test('engines opening one new schema at once create it once', async () => {
    const s = fresh();
    const stores = Array.from({ length: 4 }, () => createPostgresEventStore(s.url));
    try {
      await Promise.all(stores.map((x) => x.headPosition()));
      await stores[0]!.append([{ stream: 'node-a', expected: 'no_stream', events: [alive('a')] }]);
      assert.equal(await stores[3]!.headPosition(), 1n);
    } finally {
      await Promise.all(stores.map((x) => x.close()));
    }
  });

  void test('two handles writing one stream in turn keep its revisions dense, and each sees the other in its expected revisions', async () => {
    const s = fresh();
    const a = createPostgresEventStore(s.url);
    const b = createPostgresEventStore(s.url);
    try {
      // Each handle remembers the head it last wrote; the other handle's appends make that stale.
      for (let i = 0; i < 6; i++)
        await (i % 2 === 0 ? a : b).append([{ stream: 'node-x', expected: 'any', events: [alive('x'), alive('x')] }]);
      assert.deepEqual(
        (await a.readStream('node-x')).map((e) => e.revision),
        Array.from({ length: 12 }, (_, i) => BigInt(i)),
      );
      await rejectsWith(a.append([{ stream: 'node-x', expected: 9n, events: [alive('x')] }]), 'CONVERGE_ERR_WRONG_EXPECTED_REVISION');
      const r = await a.append([{ stream: 'node-x', expected: 11n, events: [alive('x')] }]);
      assert.deepEqual(r.streams, [{ stream: 'node-x', nextExpected: 12n, written: 1 }]);
      await rejectsWith(b.append([{ stream: 'node-x', expected: 11n, events: [alive('x')] }]), 'CONVERGE_ERR_WRONG_EXPECTED_REVISION');
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  void test('an event id that is not a UUID is refused with BAD_REQUEST and nothing is written', async () => {
    const s = fresh();
    await withStore(s.url, async (store) => {
      await rejectsWith(
        store.append([{ stream: 'node-a', expected: 'any', events: [alive('a'), alive('a', 'not-a-uuid')] }]),
        'CONVERGE_ERR_BAD_REQUEST',
      );
      assert.deepEqual(await store.readStream('node-a'), []);
      assert.equal(await store.headPosition(), null);
    });
  });

  void test('a subscription wakes for an append made through another handle, by NOTIFY (the safety poll is an hour)', async () => {
    const s = fresh();
    const reader = createPostgresEventStore(s.url, { pollMs: 3_600_000 });
    const writer = createPostgresEventStore(s.url, { pollMs: 3_600_000 });
    const seen: Recorded[] = [];
    const sub = reader.subscribe({ handler: (ev) => void seen.push(...ev) });
    try {
      await until('catch-up', () => sub.isCaughtUp());
      const e = alive('a');
      await writer.append([{ stream: 'node-a', expected: 'any', events: [e] }]);
      await until('the event from the other handle', () => seen.length === 1);
      assert.equal(seen[0]!.id, e.id);
    } finally {
      await sub.stop();
      await Promise.all([reader.close(), writer.close()]);
    }
  });

  void test('a store closed while its LISTEN connection is still being opened closes, not hangs', { timeout: 30_000 }, async () => {
    const s = fresh();
    for (let i = 0; i < 5; i++) {
      const store = createPostgresEventStore(s.url);
      const sub = store.subscribe({ handler: () => undefined });
      await sub.stop();
      await store.close();
    }
  });

  void test('after its LISTEN connection is killed, a subscription reconnects and still wakes by NOTIFY', async () => {
    const s = fresh();
    const reader = createPostgresEventStore(s.url, { pollMs: 3_600_000 });
    const writer = createPostgresEventStore(s.url, { pollMs: 3_600_000 });
    const seen: Recorded[] = [];
    const errors: unknown[] = [];
    const sub = reader.subscribe({ handler: (ev) => void seen.push(...ev), onError: (err) => void errors.push(err) });
    const listeners = async (): Promise<number[]> =>
      (
        await admin.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE query = $1', [`LISTEN converge_appended_${s.schema}`])
      ).rows.map((r) => r.pid);
    try {
      await until('catch-up', () => sub.isCaughtUp());
      const pids = await until('the LISTEN connection', async () => {
        const p = await listeners();
        return p.length > 0 && p;
      });
      assert.equal(pids.length, 1, 'one LISTEN connection');
      await admin.query('SELECT pg_terminate_backend($1)', [pids[0]]);
      await until('the lost connection reported', () => errors.length > 0);
      assert.ok(isConvergeError(errors[0], 'CONVERGE_ERR_STORE_UNAVAILABLE'));
      const again = await until('a new LISTEN connection', async () => {
        const p = await listeners();
        return p.length > 0 && p[0] !== pids[0] && p;
      });
      assert.equal(again.length, 1, 'listening again on a new connection');
      const e = alive('b');
      await writer.append([{ stream: 'node-b', expected: 'any', events: [e] }]);
      await until('the event after the reconnect', () => seen.some((x) => x.id === e.id));
    } finally {
      await sub.stop();
      await Promise.all([reader.close(), writer.close()]);
    }
  });
});
