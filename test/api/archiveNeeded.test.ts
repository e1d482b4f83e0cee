import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, test } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../../src/app/config.ts';
import { createServer } from '../../src/app/server.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { archivableFleet } from '../support/archivableFleet.ts';
import { cliIn } from '../support/cliInProcess.ts';

// docs/api.md, docs/operations.md "Retention and archive": `serve` without --archive-dir on a
// store whose history was archived answers the current state from its read model, but a read of
// the past that needs the archived events is 503 CONVERGE_ERR_ARCHIVE_NEEDED naming what was
// moved, never an answer from the kept rows alone nor a false LOG_CHANGED; it warns at start.

const dir = mkdtempSync(join(tmpdir(), 'converge-archive-needed-api-'));
after(() => rmSync(dir, { recursive: true, force: true }));

type Answer = Readonly<{ status: number; body: string }>;

test('without --archive-dir the past reads of an archived store are 503 ARCHIVE_NEEDED; with it they answer as before', async () => {
  const path = join(dir, 'fleet.db');
  const { snapshotPosition } = await archivableFleet(path);
  const archiveDir = join(dir, 'archive');
  const mid = String(snapshotPosition / 3n);
  const past = [
    `/v1/nodes/n2/state?at=${mid}`,
    `/v1/nodes/n1/evidence?at=${mid}&unsigned=true`,
    '/v1/nodes/n1/history?limit=500',
    '/v1/nodes/n3/timeline?limit=500',
  ];
  const current = ['/v1/nodes/n2', '/v1/nodes', '/readyz'];
  const answers = async (archive: string | null): Promise<{ got: Answer[]; log: string }> => {
    const chunks: string[] = [];
    const sink = new Writable({ write: (chunk, _enc, cb) => (chunks.push(String(chunk)), cb()) });
    const store = createSqliteEventStore(path);
    const flags = { store: `sqlite:${path}`, port: '0', ...(archive === null ? {} : { archiveDir: archive }) };
    const server = createServer({ config: loadConfig({ flags: {}, env: {} }, flags), logger: pino({ level: 'warn' }, sink), store });
    await server.start();
    try {
      const got: Answer[] = [];
      for (const url of [...past, ...current]) {
        const r = await server.app.inject({ method: 'GET', url });
        got.push({ status: r.statusCode, body: url.includes('evidence') ? JSON.stringify({ ...r.json(), exportedAt: null }) : r.body });
      }
      return { got, log: chunks.join('') };
    } finally {
      await server.stop();
      await store.close();
    }
  };
  const before = await answers(null);
  for (const [i, a] of before.got.entries()) assert.equal(a.status, 200, `${[...past, ...current][i]}: ${a.body}`);
  assert.doesNotMatch(before.log, /archive/, 'nothing archived, nothing to warn of');

  const moved = await cliIn(dir, [
    'store',
    'archive',
    '--older-than',
    '30d',
    '--archive-dir',
    archiveDir,
    '--store',
    `sqlite:${path}`,
    '--json',
  ]);
  assert.equal(moved.code, 0, moved.stderr);
  const { events } = JSON.parse(moved.stdout) as { events: number };

  const without = await answers(null);
  for (const [i, url] of past.entries()) {
    const a = without.got[i]!;
    assert.equal(a.status, 503, `${url}: ${a.body}`);
    const body = JSON.parse(a.body) as { code: string; detail: string };
    assert.equal(body.code, 'CONVERGE_ERR_ARCHIVE_NEEDED', url);
    assert.match(body.detail, new RegExp(`the store moved ${events} events to 1 archive segment\\(s\\); give --archive-dir`), url);
  }
  for (const [i, url] of current.entries()) assert.equal(without.got[past.length + i]!.status, 200, `${url} answers from the read model`);
  assert.match(without.log, new RegExp(`"segments":1.*archive segment`), 'serve warns at start that its past reads need --archive-dir');

  const withArchive = await answers(archiveDir);
  for (const [i, url] of past.entries()) assert.deepEqual(JSON.parse(withArchive.got[i]!.body), JSON.parse(before.got[i]!.body), url);
  assert.doesNotMatch(withArchive.log, /archive segment/);
});
