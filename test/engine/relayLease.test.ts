import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import pg from 'pg';
import pino from 'pino';
import { createRelay } from '../../src/engine/relay.ts';
import { makeDeclarationSent, streamOf } from '../../src/core/events/index.ts';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import type { EventStore } from '../../src/store/index.ts';
import type { DeclarationPublisher, OutboundDeclaration } from '../../src/transport/port.ts';
import { testKey } from '../support/history.ts';
import { describeOnPostgres, postgresTestUrl, scratchSchema } from '../support/postgres.ts';
import { until } from '../support/until.ts';

// Two engines on one PostgreSQL store each run a relay; only the one holding the
// store's relay lease publishes, so declarations are not doubled. When the holder's connection
// dies (an engine SIGKILLed), the other takes the lease and carries on from the checkpoint.

const logger = pino({ level: 'silent' });
const recording = (into: OutboundDeclaration[]): DeclarationPublisher => ({
  publish: async (d) => void into.push(d),
  close: async () => undefined,
});
// A lease given up, or whose holder's session ended, is taken within retryMs whatever the ttl, so
// those tests use a long one: a short ttl only lets a stall of this loaded process hand it over
// early. The silent holder's test waits the ttl out, so it uses a short one.
const lease = { retryMs: 50, ttlMs: 60_000 };
const shortLease = { retryMs: 50, ttlMs: 5_000 };

describeOnPostgres('relay lease on a PostgreSQL store', () => {
  const scratch = scratchSchema('converge_lease');
  const admin = new pg.Pool({ connectionString: postgresTestUrl, max: 2 });
  admin.on('error', () => undefined);
  after(async () => {
    await scratch.drop();
    await admin.end();
  });

  let serial = 0;
  const send = async (store: EventStore, n: number): Promise<string[]> => {
    const digests: string[] = [];
    for (let i = 0; i < n; i++) {
      const e = makeDeclarationSent({
        node: 'lease-n',
        serial: ++serial,
        resources: [{ id: `r${serial}` }],
        key: testKey,
        now: new Date(),
      });
      digests.push(e.data.digest);
      await store.append([{ stream: streamOf('lease-n'), expected: 'any', events: [e] }]);
    }
    return digests;
  };
  /** Backends holding this schema's relay lease (its row names the holder's backend). */
  const leaseHolders = async (): Promise<number[]> =>
    (
      await admin.query<{ pid: number }>(
        `SELECT holder_pid AS pid FROM ${scratch.schema}.leases WHERE name = 'relay' AND holder_pid IS NOT NULL`,
      )
    ).rows.map((r) => r.pid);

  test('two relays on one store: one publishes, the other stands by; when the holder dies the other takes over, and nothing is published twice', async () => {
    const storeA = createPostgresEventStore(scratch.url, { lease, pollMs: 60_000 });
    const storeB = createPostgresEventStore(scratch.url, { lease, pollMs: 60_000 });
    const byA: OutboundDeclaration[] = [];
    const byB: OutboundDeclaration[] = [];
    const relayA = createRelay({ store: storeA, publisher: recording(byA), logger });
    relayA.start();
    await until('A to hold the lease', () => relayA.active());
    let fencedBy = 0;
    const relayB = createRelay({ store: storeB, publisher: recording(byB), logger, fenceBroker: async () => void fencedBy++ });
    relayB.start();
    try {
      const first = await send(storeA, 5);
      await until('A to publish the first five', () => byA.length >= 5);
      assert.equal(relayB.active(), false, 'B stands by');
      assert.equal(byB.length, 0, 'B published nothing while A held the lease');

      // A's engine dies: the server ends its session, and the lease with it. (A's process lives on
      // in this test, so its store is closed too, or its relay would race B for the lease again.)
      const holders = await leaseHolders();
      assert.equal(holders.length, 1, 'one lease holder');
      await admin.query('SELECT pg_terminate_backend($1)', [holders[0]]);
      const closingA = storeA.close();
      await relayA.stop();
      await closingA;
      await until('B to take the lease', () => relayB.active());
      assert.equal(fencedBy, 1, 'B fenced the broker once: the lease came from a holder whose session died, not one that gave it up');

      const second = await send(storeB, 5);
      await until('B to publish the next five', () => byB.length >= 5);
      await new Promise((r) => setTimeout(r, 200));
      assert.deepEqual(
        byA.map((d) => d.digest),
        first,
      );
      assert.deepEqual(
        byB.map((d) => d.digest),
        second,
        'B resumed from the checkpoint A saved: nothing republished',
      );
    } finally {
      await relayA.stop();
      await relayB.stop();
      await Promise.all([storeA.close(), storeB.close()]);
    }
  });

  test('a relay that stops gives the lease up at once to the one waiting, which fences nothing', async () => {
    const storeA = createPostgresEventStore(scratch.url, { lease });
    const storeB = createPostgresEventStore(scratch.url, { lease });
    const fences: string[] = [];
    const relayA = createRelay({ store: storeA, publisher: recording([]), logger, checkpoint: 'relay-handover' });
    const relayB = createRelay({
      store: storeB,
      publisher: recording([]),
      logger,
      checkpoint: 'relay-handover',
      fenceBroker: async () => void fences.push('B'),
    });
    try {
      relayA.start();
      await until('A to hold the lease', () => relayA.active());
      relayB.start();
      await relayA.stop();
      await until('B to take the lease', () => relayB.active());
      assert.deepEqual(fences, [], 'a lease given up needs no fence: its holder published nothing it had not seen confirmed');
    } finally {
      await relayA.stop();
      await relayB.stop();
      await Promise.all([storeA.close(), storeB.close()]);
    }
  });
  test('a relay that takes the lease from a holder that did not give it up fences the broker before its first publish', async () => {
    // The holder's engine is gone (its session ended) or silent (its beat stopped): a publish it
    // issued may still be on the wire to the broker, so the new holder closes the way first.
    const storeB = createPostgresEventStore(scratch.url, { lease: shortLease, pollMs: 60_000 });
    const order: string[] = [];
    const publisher: DeclarationPublisher = { publish: async (d) => void order.push(`publish ${d.digest}`), close: async () => undefined };
    const relayB = createRelay({
      store: storeB,
      publisher,
      logger,
      checkpoint: 'relay-fenced',
      fenceBroker: async () => void order.push('fence'),
    });
    // A silent holder: a live backend named in the row, whose beat never moves.
    const silent = new pg.Client({ connectionString: postgresTestUrl });
    await silent.connect();
    try {
      await storeB.headPosition();
      await silent.query(
        `INSERT INTO ${scratch.schema}.leases (name, generation, beat) VALUES ('relay', 0, 0) ON CONFLICT (name) DO NOTHING`,
      );
      await silent.query(
        `UPDATE ${scratch.schema}.leases SET generation = generation + 1, beat = 0, holder_pid = pg_backend_pid(),
                holder_start = (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()) WHERE name = 'relay'`,
      );
      const [digest] = await send(storeB, 1);
      relayB.start();
      await until('B to take the lease from the silent holder and publish', () => order.includes(`publish ${digest}`), 30_000);
      assert.equal(
        order[0],
        'fence',
        "fenced before the first publish (the relay resumes from the start: earlier tests' declarations go out too)",
      );
      assert.equal(order.filter((o) => o === 'fence').length, 1, 'fenced once');
    } finally {
      await relayB.stop();
      await silent.end();
      await storeB.close();
    }
  });
});
