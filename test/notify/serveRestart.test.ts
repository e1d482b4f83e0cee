import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { historyInStore } from '../support/history.ts';
import { startServe } from '../support/serveProcess.ts';
import type { ServeProcess } from '../support/serveProcess.ts';
import { until } from '../support/until.ts';
import { startReceiver } from './receiver.ts';
import type { Receiver } from './receiver.ts';

// `converge serve --notify-config` as an operator runs it (the built CLI: `npm run build` first),
// SIGKILLed while a delivery is held open: after a restart every notification has arrived at least
// once, a duplicate with the same id; a clean stop with the receiver down leaves the snapshot ahead
// of the cursor, and the restart still sends what was missed; and no restart sends the past again.

const dir = mkdtempSync(join(tmpdir(), 'converge-notify-'));
const running: ServeProcess[] = [];
let receiver: Receiver | null = null;
after(async () => {
  for (const s of running) await s.kill();
  await receiver?.close();
  rmSync(dir, { recursive: true, force: true });
});

const byNode = (r: Receiver): Map<string, Set<string>> => {
  const m = new Map<string, Set<string>>();
  for (const msg of r.received) for (const n of msg.json.data.notifications) m.set(n.node!, (m.get(n.node!) ?? new Set()).add(n.id));
  return m;
};

test(
  'serve SIGKILLed mid-delivery: each notification arrives, duplicates share an id; no restart re-sends the past',
  { timeout: 120_000 },
  async () => {
    const r = (receiver = await startReceiver());
    const db = join(dir, 'events.db');
    const cfg = join(dir, 'notify.json');
    writeFileSync(
      cfg,
      JSON.stringify({
        destinations: [{ name: 'hook', kind: 'webhook', url: r.url, secret: { env: 'HOOK_SECRET' }, retry: { minMs: 20, maxMs: 200 } }],
      }),
    );
    const serve = (): ServeProcess => {
      const s = startServe(['serve', '--port', '0', '--store', `sqlite:${db}`, '--notify-config', cfg, '--log-level', 'warn'], {
        HOOK_SECRET: 'secret-of-the-test',
      });
      running.push(s);
      return s;
    };
    let s = serve();
    await s.url;
    const store = createSqliteEventStore(db);
    const h = historyInStore(store);
    const refuse = async (node: string): Promise<void> => {
      const { digest } = await h.send(node);
      await h.report(node, { declared: digest, refused: 'no' });
    };

    r.hold = true;
    for (let i = 0; i < 5; i++) await refuse(`k${i}`);
    await until('a delivery held open', () => r.attempts >= 1);
    await s.kill();
    r.hold = false;
    r.release();
    s = serve();
    await s.url;
    await until('every notification', () => byNode(r).size >= 5);
    for (const [node, ids] of byNode(r)) assert.equal(ids.size, 1, `${node}: one id however often sent`);

    // Receiver down at a clean stop: the snapshot is written at the head, the cursor stays behind.
    r.down = true;
    await refuse('g1');
    await until('g1 tried', () => r.attempts >= 7);
    assert.equal(await s.stop(), 0, s.stderr());
    r.down = false;
    const before = r.received.length;
    s = serve();
    await s.url;
    await until('g1 after the restart', () => byNode(r).has('g1'));
    await refuse('g2');
    await until('g2', () => byNode(r).has('g2'));
    const since = r.received.slice(before).flatMap((m) => m.json.data.notifications.map((n) => n.node));
    assert.deepEqual([...new Set(since)], ['g1', 'g2'], 'nothing before g1 was sent again');
    assert.equal(await s.stop(), 0, s.stderr());
    await store.close();
  },
);
