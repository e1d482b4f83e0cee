import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import pg from 'pg';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import { sleep, until } from '../support/until.ts';
import { describeOnPostgres, postgresTestUrl, scratchSchema } from '../support/postgres.ts';
import { batchWrites } from './fixtures/sqliteAppender.ts';

// An operator's pg_terminate_backend, a failover or a proxy dropping idle sessions ends the
// store's connections at any moment: a pooled one checked out mid-transaction, an idle one, the
// LISTEN connection. Each must turn into an error the store retries or reports, never into an
// unhandled 'error' event that ends the engine. Appends go on throughout; every append that
// resolved is stored exactly once.

const kills = 50;

describeOnPostgres('PostgreSQL store while its backends are terminated', () => {
  const scratch = scratchSchema('converge_kills');
  after(() => scratch.drop());

  test(
    `${kills} rounds of pg_terminate_backend under appends and a subscription: the process lives, nothing lost or doubled`,
    { timeout: 180_000 },
    async () => {
      const crashes: unknown[] = [];
      const onUncaught = (err: unknown): void => void crashes.push(err);
      process.on('uncaughtException', onUncaught);
      // Its own application name, so the kills reach this test's connections only, never another's.
      const applicationName = `converge-kills-${process.pid}`;
      const store = createPostgresEventStore(scratch.url, { pollMs: 200, applicationName });
      const admin = new pg.Client({ connectionString: postgresTestUrl });
      admin.on('error', () => undefined);
      await admin.connect();
      let seen = 0;
      const sub = store.subscribe({ handler: (events) => void (seen += events.length) });
      const committed: number[] = [];
      let stop = false;
      const appender = (async () => {
        for (let b = 0; !stop; b++) {
          // As the engine does: an append that failed because its connection died is tried again (ids make it a no-op if stored).
          for (;;) {
            try {
              await store.append(batchWrites('kills', b));
              committed.push(b);
              break;
            } catch {
              await sleep(10);
            }
          }
        }
      })();
      try {
        let terminated = 0;
        for (let i = 0; i < kills; i++) {
          await sleep(20 + ((i * 37) % 60));
          terminated +=
            (
              await admin.query(
                `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid() AND datname = current_database()`,
                [applicationName],
              )
            ).rowCount ?? 0;
        }
        stop = true;
        assert.ok(terminated > 0, "the kills reached the store's connections (by their application name)");
        process.stdout.write(`# ${terminated} backends terminated in ${kills} rounds\n`);
        await appender;
        assert.deepEqual(crashes, [], 'no unhandled error from a terminated connection');
        // The load ran across every kill: the appender stops only now, and an append after the last kill succeeds.
        await store.append(batchWrites('kills', 1_000_001));
        committed.push(1_000_001);
        const counts = new Map<string, number>();
        for await (const page of store.readAll()) for (const e of page) counts.set(e.id, (counts.get(e.id) ?? 0) + 1);
        const expected = committed.flatMap((b) => batchWrites('kills', b).flatMap((w) => w.events.map((e) => e.id)));
        for (const id of expected) assert.equal(counts.get(id), 1, `event ${id} of a committed batch stored once`);
        assert.ok(
          [...counts.values()].every((n) => n === 1),
          'no event stored twice',
        );
        // The subscription, woken through its LISTEN connection or its poll, reads every event despite the kills.
        await until('the subscription to read every stored event', () => seen >= counts.size, { timeoutMs: 60_000 });
      } finally {
        stop = true;
        await appender.catch(() => undefined);
        await sub.stop();
        await store.close();
        await admin.end();
        process.off('uncaughtException', onUncaught);
      }
    },
  );
});
