import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import { createBrokerLab, describeOnBroker } from '../support/broker.ts';
import { describeOnPostgres, scratchSchema } from '../support/postgres.ts';
import { buildPreviousRelease } from '../support/previousRelease.ts';
import type { PreviousRelease } from '../support/previousRelease.ts';
import { runUpgradeArchive } from './upgradeArchiveScenario.ts';
import { runUpgrade } from './upgradeScenario.ts';

// docs/operations.md "Upgrades": the previous release and this one side by side on one
// PostgreSQL store and one broker, in both orders, and how each refuses what it cannot read.
// Needs RabbitMQ, PostgreSQL, this checkout's build (npm run build) and git history holding the
// previous release, which the test builds once and keeps under the OS temp dir. The archive's
// upgrade needs no broker: one SQLite file and its archive folder, then the same on a PostgreSQL
// schema of its own.

/**
 * The previous release, built (or taken from the cache) in a `before` of the suite this is called
 * in. Building it takes minutes on a loaded machine when no cached build exists: it gets a budget
 * of its own, apart from the tests'.
 */
function releaseBuiltBefore(): () => PreviousRelease {
  let release: PreviousRelease | undefined;
  before(
    () => {
      release = buildPreviousRelease();
    },
    { timeout: 1_200_000 },
  );
  return () => release!;
}

const archiveClaim =
  'the previous release archives, this one reads it and archives more, the previous one reads that: the same answers throughout';

/** The archive's upgrade in a temp dir of its own, on `storeUrl` (SQLite in that dir when not given). */
async function upgradeArchive(t: TestContext, release: PreviousRelease, storeUrl?: string): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'converge-upgrade-archive-'));
  try {
    const r = await runUpgradeArchive(release, dir, storeUrl);
    t.diagnostic(r.notes.join('; '));
    for (const [check, held] of Object.entries(r.checks)) assert.equal(held, true, `${check} did not hold; ${r.notes.join('; ')}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('upgrade over an archive', () => {
  const built = releaseBuiltBefore();
  test(`on SQLite ${archiveClaim}`, { timeout: 300_000 }, (t) => upgradeArchive(t, built()));
  describeOnPostgres('on PostgreSQL', () => {
    test(archiveClaim, { timeout: 300_000 }, async (t) => {
      const scratch = scratchSchema('converge_upgrade_archive');
      try {
        await upgradeArchive(t, built(), scratch.url);
      } finally {
        await scratch.drop();
      }
    });
  });
});

describeOnBroker('upgrade from the previous release', () => {
  describeOnPostgres('upgrade on one PostgreSQL store', () => {
    const built = releaseBuiltBefore();
    test(
      'old and new side by side, old stopped, then new and old, new stopped: nothing lost, each reads the other, refusals are loud',
      { timeout: 300_000 },
      async (t) => {
        const release = built();
        t.diagnostic(
          `previous release ${release.commit.slice(0, 12)} ${release.builtNow ? `built in ${release.buildMs} ms` : 'from the cache'} (${release.dir})`,
        );
        const lab = await createBrokerLab('converge-upgrade');
        try {
          const r = await runUpgrade(release, lab);
          t.diagnostic(r.notes.join('; '));
          for (const [check, held] of Object.entries(r.checks)) assert.equal(held, true, `${check} did not hold; ${r.notes.join('; ')}`);
        } finally {
          await lab.remove();
        }
      },
    );
  });
});
