import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { loadConfig } from '../../src/app/config.ts';
import { createServer } from '../../src/app/server.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { archivableFleet } from '../support/archivableFleet.ts';
import { cliIn } from '../support/cliInProcess.ts';
import { logger } from '../support/logger.ts';

// docs/operations.md "Retention and archive": `serve --archive-dir` answers the API's reads of the
// past — a node's state as of a moment, its history, its timeline and the fleet as of a moment — over the archive too, with
// the answers it gave before the move; a segment archived while it runs is read from then on.

const dir = mkdtempSync(join(tmpdir(), 'converge-past-reads-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('state?at=, history, timeline and fleet?at= answer the same after the history moved to the archive', async () => {
  const path = join(dir, 'fleet.db');
  const { snapshotPosition } = await archivableFleet(path);
  const archiveDir = join(dir, 'archive');
  const mid = String(snapshotPosition / 3n);
  const urls = [
    `/v1/nodes/n2/state?at=${mid}`,
    '/v1/nodes/n1/history?limit=500',
    '/v1/nodes/n3/history?limit=500',
    '/v1/nodes/n3/timeline?limit=500',
    // The fleet as of a moment: its history is folded from the store's first event after a restore.
    `/v1/fleet?at=${mid}`,
    `/v1/fleet?at=${snapshotPosition}`,
  ];
  const answers = async (): Promise<string[]> => {
    const store = createSqliteEventStore(path);
    const config = loadConfig({ flags: {}, env: {} }, { store: `sqlite:${path}`, port: '0', archiveDir });
    const server = createServer({ config, logger, store });
    await server.start();
    try {
      const out: string[] = [];
      for (const url of urls) {
        const r = await server.app.inject({ method: 'GET', url });
        assert.equal(r.statusCode, 200, `${url}: ${r.body}`);
        out.push(r.body);
      }
      return out;
    } finally {
      await server.stop();
      await store.close();
    }
  };
  const before = await answers();
  const moved = await cliIn(dir, ['store', 'archive', '--older-than', '30d', '--archive-dir', archiveDir, '--store', `sqlite:${path}`]);
  assert.equal(moved.code, 0, moved.stderr);
  const afterMove = await answers();
  for (let i = 0; i < urls.length; i++) assert.deepEqual(JSON.parse(afterMove[i]!), JSON.parse(before[i]!), urls[i]);
});
