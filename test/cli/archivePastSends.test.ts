import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { cliIn } from '../support/cliInProcess.ts';
import { historyInStore } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { rolloutInStore } from '../support/rolloutInStore.ts';

// docs/operations.md "Retention and archive": `send --as-of` and `rollout explain` read over the
// archive when given --archive-dir, so a spec sent, or a rollout run, before the policy is still
// restored and told.

const dir = mkdtempSync(join(tmpdir(), 'converge-archive-sends-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const dayMs = 86_400_000;

/** Two nodes: a rollout 80 days ago and its reports, then weeks of other sends and reports, a snapshot. */
async function oldRollout(path: string): Promise<{ between: string }> {
  const store = createSqliteEventStore(path);
  const h = historyInStore(store, Date.now() - 90 * dayMs);
  const nodes = ['n1', 'n2'];
  for (const n of nodes) await h.alive(n);
  h.tick(dayMs);
  const r = rolloutInStore(store, h, 'r-old', nodes, { resources: [{ id: 'web', image: 'nginx:1.25' }] });
  await r.start();
  await r.run();
  h.tick(60_000);
  for (const n of nodes) await h.report(n, { declared: await r.digestSentTo(n), applied: ['web'] });
  h.tick(60_000);
  await r.run();
  h.tick(dayMs);
  const between = h.now().toISOString();
  for (let week = 0; week < 8; week++) {
    h.tick(7 * dayMs);
    for (const n of nodes) {
      const s = await h.send(n, [{ id: 'web', image: `nginx:1.${26 + week}` }]);
      h.tick(60_000);
      await h.report(n, { declared: s.digest, applied: ['web'] });
    }
  }
  const runner = createProjectionRunner({ store, logger, snapshot: { path: `${path}.snapshot`, everyEvents: 1_000_000 } });
  await runner.start();
  await runner.caughtUp();
  await runner.writeSnapshot();
  await runner.stop();
  await store.close();
  return { between };
}

test('send --as-of and rollout explain answer over the archive as they did before the move', async () => {
  const path = join(dir, 'store.db');
  const { between } = await oldRollout(path);
  const key = await cliIn(dir, ['keygen', '--out', 'key.pem', '--json']);
  assert.equal(key.code, 0, key.stderr);
  const env = { CONVERGE_STORE: `sqlite:${path}`, CONVERGE_SIGNING_KEY: join(dir, 'key.pem') };
  const archive = ['--archive-dir', join(dir, 'archive')];

  const explained = await cliIn(dir, ['rollout', 'explain', 'r-old', '--json'], env);
  assert.equal(explained.code, 0, explained.stderr);
  const sentBefore = await cliIn(dir, ['send', 'n1', '--as-of', between, '--json'], env);
  assert.equal(sentBefore.code, 0, sentBefore.stderr);
  const restored = JSON.parse(sentBefore.stdout).restored;
  assert.equal(restored.serial, 1, "the rollout's send to n1");

  const moved = await cliIn(dir, ['store', 'archive', '--older-than', '30d', ...archive, '--json'], env);
  assert.equal(moved.code, 0, moved.stderr);
  assert.ok(JSON.parse(moved.stdout).events > 10, moved.stdout);

  // The hot store alone no longer holds the rollout's sends: without the archive both answer less.
  const hotExplain = await cliIn(dir, ['rollout', 'explain', 'r-old', '--json'], env);
  assert.notEqual(hotExplain.stdout, explained.stdout, 'the hot store alone tells less of the rollout');
  const hotSend = await cliIn(dir, ['send', 'n2', '--as-of', between, '--json'], env);
  assert.notEqual(hotSend.code, 0, 'without the archive, n2 had been sent nothing by then');

  const explainedOver = await cliIn(dir, ['rollout', 'explain', 'r-old', '--json', ...archive], env);
  assert.equal(explainedOver.code, 0, explainedOver.stderr);
  assert.equal(explainedOver.stdout, explained.stdout, 'the same story read over the archive');
  const sentOver = await cliIn(dir, ['send', 'n2', '--as-of', between, '--json', ...archive], env);
  assert.equal(sentOver.code, 0, sentOver.stderr);
  assert.equal(JSON.parse(sentOver.stdout).restored.serial, 1, "the rollout's send to n2, read from the archive");
  assert.equal(JSON.parse(sentOver.stdout).restored.specDigest, restored.specDigest);
});
