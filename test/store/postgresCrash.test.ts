import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import { describeOnPostgres, scratchSchema } from '../support/postgres.ts';
import { prng } from '../support/prng.ts';
import { assertEveryReportedBatchOnce, runAndKill } from './fixtures/killMidRun.ts';

// As test/store/sqliteCrash.test.ts, against PostgreSQL. A child appends many-stream
// batches and reports each one only after append() resolved; it is SIGKILLed at seeded random
// moments, mid-statement or between two. The server keeps running (it is shared and must not be
// killed here): what this proves is that an append is one transaction, acknowledged only once
// committed, and that a connection dying mid-append leaves nothing half-written.

const appender = fileURLToPath(new URL('./fixtures/postgresAppender.ts', import.meta.url));
const seed = Number(process.env.CONVERGE_CRASH_SEED ?? 20240601);

describeOnPostgres('PostgreSQL store under SIGKILL', () => {
  const scratch = scratchSchema('converge_crash');
  after(() => scratch.drop());

  test(
    `every batch reported committed survives SIGKILL exactly once and no partial batch exists (seed ${seed})`,
    { timeout: 120_000 },
    async () => {
      const random = prng(seed);
      const reported = new Map<string, number[]>();
      for (let round = 0; round < 5; round++) {
        const run = `r${round}`;
        reported.set(run, await runAndKill(appender, [scratch.url, run], run, 1 + Math.floor(random() * 30), Math.floor(random() * 40)));
      }
      const store = createPostgresEventStore(scratch.url);
      try {
        await assertEveryReportedBatchOnce(store, reported);
      } finally {
        await store.close();
      }
    },
  );
});
