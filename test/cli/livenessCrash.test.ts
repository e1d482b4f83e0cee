import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import amqp from 'amqplib';
import Database from 'better-sqlite3';
import { observationStream, streamOf } from '../../src/core/events/index.ts';
import type { Recorded } from '../../src/core/events/index.ts';
import { encodeAlive } from '../../src/core/wire/index.ts';
import { stateAsOf } from '../../src/readModel/queries.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { createScratchVhost, describeOnBroker } from '../support/broker.ts';
import type { ScratchVhost } from '../support/broker.ts';
import { startServe } from '../support/serveProcess.ts';
import type { ServeProcess } from '../support/serveProcess.ts';
import { sleep, until } from '../support/until.ts';

// The crash bound of liveness as recorded (docs/design.md §3, docs/operations.md "Liveness and the
// last-seen lease"): `serve` SIGKILLed while nodes are alive. The next start closes the crashed
// span at the last flush of the lease, so the record says "not observed" from there to the
// restart, never connected or disconnected; the node that went quiet before the kill is recorded
// silent with the last-seen time the lease held, which is no earlier than its last alive was sent
// and no later than the kill. Built CLI (`npm run build` first), real broker, SQLite.

const dir = mkdtempSync(join(tmpdir(), 'converge-livecrash-'));
const running: ServeProcess[] = [];
let vhost: ScratchVhost | null = null;
after(async () => {
  for (const s of running) await s.kill();
  await vhost?.remove();
  rmSync(dir, { recursive: true, force: true });
});

const flushMs = 300;
const graceMs = 3_000;
const at = (ms: number) => ({ kind: 'time' as const, time: ms, iso: new Date(ms).toISOString() });

describeOnBroker('liveness across a SIGKILL of serve', () => {
  test('the crashed span reads not-observed; the quiet node is silent at its leased last-seen time', { timeout: 180_000 }, async () => {
    vhost = await createScratchVhost('converge-livecrash');
    const db = join(dir, 'events.db');
    const serve = (): ServeProcess => {
      const s = startServe(
        [
          'serve',
          '--port',
          '0',
          '--store',
          `sqlite:${db}`,
          '--amqp',
          vhost!.amqpUrl,
          '--grace-ms',
          String(graceMs),
          '--last-seen-flush-ms',
          String(flushMs),
          '--trust-missing-user-id',
          'on',
          '--engine-id',
          'crash-test',
          '--log-level',
          'warn',
        ],
        {},
      );
      running.push(s);
      return s;
    };
    const first = serve();
    await first.url;
    const conn = await amqp.connect(vhost.amqpUrl);
    const ch = await conn.createConfirmChannel();
    const alive = async (node: string): Promise<number> => {
      const sentAt = Date.now();
      ch.publish('mesh', 'alive', Buffer.from(encodeAlive({ node })));
      await ch.waitForConfirms();
      return sentAt;
    };
    // `quiet` speaks for a while and stops; `steady` goes on until after the kill.
    let quietLastSent = 0;
    for (let i = 0; i < 10; i++) {
      quietLastSent = await alive('quiet');
      await alive('steady');
      await sleep(100);
    }
    let steadyOn = true;
    const steadyLoop = (async () => {
      while (steadyOn) {
        await alive('steady').catch(() => undefined);
        await sleep(200);
      }
    })();
    // The lease holds quiet's last alive and a flush after it: what the record may claim up to the kill.
    const lease = new Database(db, { readonly: true, fileMustExist: true });
    const leased = await until('the lease flushed with quiet’s last alive', async () => {
      const seen = lease.prepare("SELECT ms FROM last_seen WHERE node = 'quiet'").pluck().get() as number | undefined;
      const flushed = lease.prepare("SELECT ms FROM last_seen_flushes WHERE engine = 'crash-test'").pluck().get() as number | undefined;
      return seen !== undefined && seen >= quietLastSent && flushed !== undefined && flushed > seen ? { seen, flushed } : null;
    });
    lease.close();
    const killedAt = Date.now();
    await first.kill();
    await sleep(1_000);
    const second = serve();
    await second.url;
    const store = createSqliteEventStore(db);
    try {
      const silent = await until('quiet recorded silent after the restart', async () =>
        (await store.readStream(streamOf('quiet'))).find((e): e is Recorded & { type: 'NodeSilent' } => e.type === 'NodeSilent'),
      );
      steadyOn = false;
      await steadyLoop;
      const lastSeen = Date.parse(silent.data.lastSeenAt);
      assert.ok(lastSeen >= quietLastSent, 'the recorded last-seen time is not before quiet’s last alive was sent');
      assert.ok(lastSeen >= leased.seen && lastSeen <= killedAt, 'and it is the leased time, from before the kill');
      const starts = (await store.readStream(observationStream)).filter((e) => e.type === 'ObservationStarted');
      assert.equal(starts.length, 2);
      const restart = starts[1]!;
      assert.ok(restart.type === 'ObservationStarted' && restart.data.lastFlushAt !== null);
      const lastFlush = Date.parse(restart.data.lastFlushAt);
      const restartedAt = Date.parse(restart.data.at);
      assert.ok(lastFlush >= leased.flushed && lastFlush <= killedAt, 'the crashed span ends at a flush between the one seen and the kill');
      // As of a moment between the last flush and the restart, no node is connected or disconnected.
      const gap = Math.floor((Math.max(lastFlush, killedAt) + restartedAt) / 2);
      for (const node of ['quiet', 'steady'])
        assert.equal((await stateAsOf(store, node, at(gap))).state.liveness.state, 'not-observed', `${node} in the crashed span`);
      // Before the last flush both were heard; after the restart quiet is disconnected, steady connected.
      assert.equal((await stateAsOf(store, 'quiet', at(leased.seen))).state.liveness.state, 'connected');
      assert.equal((await stateAsOf(store, 'quiet', at(Date.parse(silent.data.observedAt)))).state.liveness.state, 'disconnected');
      assert.equal((await stateAsOf(store, 'steady', at(Date.parse(silent.data.observedAt)))).state.liveness.state, 'connected');
      console.log(
        `# crash bound: the record's last flush was ${killedAt - lastFlush} ms before the kill (--last-seen-flush-ms ${flushMs}); the span from it to the restart reads not-observed`,
      );
    } finally {
      steadyOn = false;
      await steadyLoop;
      await store.close();
      await conn.close().catch(() => undefined);
      await second.stop();
    }
  });
});
