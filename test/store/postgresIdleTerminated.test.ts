import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, test } from 'node:test';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import { describeOnPostgres, postgresTestUrl, scratchSchema } from '../support/postgres.ts';
import { batchWrites } from './fixtures/sqliteAppender.ts';

// A pooled connection the server ended while it sat idle (pg_terminate_backend, a failover, an
// idle-session timeout) is not the caller's failure: the pool hands it out before node-postgres
// has read the server's goodbye, and the store must then try again on a fresh connection. The
// kills run in psql, synchronously, so this process cannot read the goodbye before it calls the
// store: the race a busy engine loses now and then happens here every time.

/** Terminate every backend named `applicationName` and wait until the server has none left, blocking this process. */
function terminateBlocking(applicationName: string): void {
  const name = applicationName.replaceAll("'", "''");
  const sql = `DO $$ BEGIN
    PERFORM pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '${name}';
    FOR i IN 1..1000 LOOP
      PERFORM pg_stat_clear_snapshot();
      EXIT WHEN NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = '${name}');
      PERFORM pg_sleep(0.01);
    END LOOP;
  END $$`;
  execFileSync('psql', [postgresTestUrl, '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-c', sql], { stdio: ['ignore', 'ignore', 'pipe'] });
}

describeOnPostgres('PostgreSQL store after its idle connections were terminated', () => {
  const scratch = scratchSchema('converge_idle_kill');
  after(() => scratch.drop());

  test('an append and a read each succeed on a fresh connection, and the append is stored once', async () => {
    const applicationName = `converge-idle-${process.pid}`;
    const poolSize = 4;
    const store = createPostgresEventStore(scratch.url, { applicationName, poolSize });
    try {
      // Every pooled connection open and idle: four appends at once check out four.
      await Promise.all([0, 1, 2, 3].map((b) => store.append(batchWrites('idle', b))));
      for (let round = 0; round < 3; round++) {
        terminateBlocking(applicationName);
        await store.append(batchWrites('idle', 10 + round));
        terminateBlocking(applicationName);
        const read = await store.readStream('node-crash-10');
        assert.ok(read.length > 0, 'the read after the kill returns the stream');
      }
      const counts = new Map<string, number>();
      for await (const page of store.readAll()) for (const e of page) counts.set(e.id, (counts.get(e.id) ?? 0) + 1);
      for (const b of [0, 1, 2, 3, 10, 11, 12])
        for (const w of batchWrites('idle', b))
          for (const e of w.events) assert.equal(counts.get(e.id), 1, `event ${e.id} of batch ${b} stored once`);
    } finally {
      await store.close();
    }
  });
});
