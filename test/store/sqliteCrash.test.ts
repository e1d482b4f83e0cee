import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { prng } from '../support/prng.ts';
import { assertEveryReportedBatchOnce, runAndKill } from './fixtures/killMidRun.ts';

// docs/design.md §5: an acknowledged append survives the process dying at any instant, and a
// many-stream append is one transaction. A child appends multi-stream batches and reports each
// one only after append() resolved; we SIGKILL it at seeded random moments, then check the file
// (test/store/postgresCrash.test.ts does the same against PostgreSQL).

const appender = fileURLToPath(new URL('./fixtures/sqliteAppender.ts', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'converge-crash-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const seed = Number(process.env.CONVERGE_CRASH_SEED ?? 20240601);

for (const sync of ['full', 'group', 'thread'] as const) {
  test(
    `every batch reported committed survives SIGKILL exactly once and no partial batch exists, sync ${sync} (seed ${seed})`,
    { timeout: 120_000 },
    async (t) => {
      if (sync !== 'full') t.diagnostic('SIGKILL, not power loss: power loss cannot be tested here');
      process.env['CONVERGE_TEST_SQLITE_SYNC'] = sync;
      t.after(() => delete process.env['CONVERGE_TEST_SQLITE_SYNC']);
      const path = join(dir, `crash-${sync}.db`);
      const random = prng(seed);
      const reported = new Map<string, number[]>();
      for (let round = 0; round < 5; round++) {
        const run = `r${round}`;
        reported.set(run, await runAndKill(appender, [path, run], run, 1 + Math.floor(random() * 30), Math.floor(random() * 40)));
      }

      const store = createSqliteEventStore(path);
      try {
        await assertEveryReportedBatchOnce(store, reported);
      } finally {
        await store.close();
      }
    },
  );
}
