import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { loadConfig } from '../../src/app/config.ts';
import { startRetention } from '../../src/app/retention.ts';
import type { ConvergeError } from '../../src/core/errors.ts';
import { archiveSqliteStore } from '../../src/store/sqlite/sqliteArchive.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { archivableFleet, dayMs } from '../support/archivableFleet.ts';
import { logger } from '../support/logger.ts';

// serve --retain (docs/operations.md "Retention and archive"): the same move as `store archive`,
// in bounded batches of one small segment each, below the snapshot serve wrote.

const dir = mkdtempSync(join(tmpdir(), 'converge-retention-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('serve --retain moves, segment by segment, what one store archive run moves', async () => {
  const path = join(dir, 'fleet.db');
  const { snapshotPosition } = await archivableFleet(path);
  const copy = join(dir, 'copy.db');
  copyFileSync(path, copy);
  if (existsSync(`${path}-wal`)) copyFileSync(`${path}-wal`, `${copy}-wal`);
  const now = Date.now();
  const oneRun = await archiveSqliteStore(copy, {
    dir: join(dir, 'one'),
    before: new Date(now - 30 * dayMs).toISOString(),
    belowPosition: snapshotPosition,
  });

  const retention = startRetention({
    store: { kind: 'sqlite', path },
    archiveDir: join(dir, 'batched'),
    retainMs: 30 * dayMs,
    snapshotPath: `${path}.snapshot`,
    logger,
    now: () => now,
    segmentEvents: 10,
    pauseMs: 0,
  });
  await retention.idle();
  await retention.stop();

  const store = createSqliteEventStore(path);
  try {
    const manifest = await store.archiveManifest!();
    assert.ok(manifest.segments.length >= Math.ceil(oneRun.events / 10), `${manifest.segments.length} segments`);
    assert.ok(manifest.segments.every((s) => s.events <= 10));
    assert.equal(
      manifest.segments.reduce((n, s) => n + s.events, 0),
      oneRun.events,
    );
  } finally {
    await store.close();
  }
});

test('--retain takes a duration in days, hours or minutes, and needs --archive-dir', () => {
  const c = loadConfig({ flags: { retain: '30d', 'archive-dir': '/var/lib/converge/archive' }, env: {} });
  assert.equal(c.retain, 30 * dayMs);
  assert.equal(loadConfig({ flags: { 'archive-dir': 'a' }, env: { CONVERGE_RETAIN: '90m' } }).retain, 90 * 60_000);
  assert.throws(
    () => loadConfig({ flags: { retain: '30d' }, env: {} }),
    (e: ConvergeError) => e.code === 'CONVERGE_ERR_CONFIG_INVALID' && /--retain .*needs --archive-dir/.test(e.message),
  );
  assert.throws(
    () => loadConfig({ flags: { retain: 'a month', 'archive-dir': 'a' }, env: {} }),
    (e: ConvergeError) => e.code === 'CONVERGE_ERR_CONFIG_INVALID' && /30d/.test(e.message),
  );
});
