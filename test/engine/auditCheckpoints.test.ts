import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { verifyCheckpoint } from '../../src/core/audit/checkpoint.ts';
import type { SignedCheckpoint } from '../../src/core/audit/checkpoint.ts';
import { parseWitnessJson } from '../../src/core/audit/checkpointCheck.ts';
import { verifyLog } from '../../src/core/audit/verifyLog.ts';
import { auditStream, signedCheckpointOf } from '../../src/core/events/index.ts';
import type { AuditCheckpointed, Recorded } from '../../src/core/events/index.ts';
import { createAuditCheckpoints } from '../../src/engine/auditCheckpoints.ts';
import { createFolderWitness, createWebhookWitness } from '../../src/engine/auditWitness.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/port.ts';
import { writeHistory } from '../support/auditHistory.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';
import { tempDir } from '../support/tempDir.ts';

// The engine's checkpointer (docs/audit.md#checkpoints-and-witnesses): every N events, after a
// while if anything was appended, and on stop; each in the log and handed to the witnesses.

const key = generateKeyPairSync('ed25519');
const dir = tempDir({ after }, 'converge-witness-');

const checkpoints = async (store: EventStore): Promise<SignedCheckpoint[]> =>
  ((await store.readStream(auditStream)) as Recorded<AuditCheckpointed>[]).map((e) => signedCheckpointOf(e.data));

/** The tree's roots at the given sizes, recomputed from the stored rows. */
async function rootsAt(store: EventStore, sizes: readonly number[]): Promise<ReadonlyMap<number, string>> {
  const r = await verifyLog(
    { head: () => store.auditHead(), read: (a, limit) => store.readStored({ after: a, limit }) },
    { rootsAt: new Set(sizes) },
  );
  assert.equal(r.finding, null);
  return r.roots;
}

test('a checkpoint every N events, none while nothing but its own event was appended, and one on stop; each signed, in the log and in the witness folder', async () => {
  const store = createMemoryEventStore();
  const folder = join(dir, 'every-n');
  let now = Date.parse('2026-01-01T00:00:00Z');
  const cp = createAuditCheckpoints({
    store,
    key: key.privateKey,
    logger,
    everyEvents: 30,
    everyMs: 60_000,
    pollMs: 5,
    now: () => now,
    witnesses: [createFolderWitness(folder, logger)],
  });
  await writeHistory(store, 4); // 12 events
  await cp.start();
  // The first checkpoint anchors what the log held at start.
  await until('the first checkpoint', async () => (await checkpoints(store)).length === 1);
  await writeHistory(store, 12, 1); // 36 more: past 30
  await until('a checkpoint after 30 events', async () => (await checkpoints(store)).length === 2);
  assert.equal(await cp.checkpoint(), null, 'nothing appended since but the checkpoint itself');
  now += 61_000;
  assert.equal(await cp.checkpoint(), null, 'nor after a while');
  await writeHistory(store, 1, 2);
  await cp.stop();
  const all = await checkpoints(store);
  assert.equal(all.length, 3);
  const head = await store.auditHead();
  assert.equal(all[2]!.checkpoint.size, Number(head.size) - 1, 'the last covers every event but its own');
  const roots = await rootsAt(
    store,
    all.map((c) => c.checkpoint.size),
  );
  for (const c of all) {
    assert.ok(verifyCheckpoint(c, key.publicKey));
    assert.equal(c.checkpoint.root, roots.get(c.checkpoint.size));
  }
  const files = readdirSync(folder).sort();
  assert.equal(files.length, 3, files.join());
  assert.ok(
    files.every((f) => f.endsWith('.json') && !f.startsWith('.')),
    'no temporary file left',
  );
  assert.deepEqual(
    files.map((f) => parseWitnessJson(readFileSync(join(folder, f), 'utf8'))),
    all,
  );
});

test('after a while, a checkpoint if anything was appended; a restart goes on from the last one in the log', async () => {
  const store = createMemoryEventStore();
  let now = 0;
  const options = { store, key: key.privateKey, logger, everyEvents: 10_000, everyMs: 1_000, pollMs: 5, now: () => now };
  await writeHistory(store, 2);
  const first = createAuditCheckpoints(options);
  await first.start();
  await until('the first checkpoint', async () => (await checkpoints(store)).length === 1);
  await writeHistory(store, 1, 1);
  now += 1_001;
  await until('a checkpoint after the time', async () => (await checkpoints(store)).length === 2);
  await first.stop();
  assert.equal((await checkpoints(store)).length, 2, 'stop: nothing new to sign');
  const second = createAuditCheckpoints(options);
  await second.start();
  assert.equal(await second.checkpoint(), null, 'the restarted engine knows the head is signed');
  await second.stop();
});

/** A witness webhook receiver: answers 503 to the first `failures` POSTs, then 204; or never, when `hang`. */
async function receiver(failures: number, hang = false) {
  const bodies: string[] = [];
  let attempts = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      attempts++;
      if (hang) return;
      if (attempts <= failures) return void res.writeHead(503).end();
      bodies.push(body);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  after(() => {
    server.closeAllConnections();
    server.close();
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/checkpoints`;
  return { url, bodies, attempts: () => attempts };
}

test('the webhook witness POSTs each checkpoint, retrying with backoff until the receiver takes it', async () => {
  const r = await receiver(2);
  const w = createWebhookWitness(r.url, logger, { minMs: 5, maxMs: 20 });
  const store = createMemoryEventStore();
  await writeHistory(store, 3);
  const cp = createAuditCheckpoints({ store, key: key.privateKey, logger, everyEvents: 5, everyMs: 60_000, pollMs: 5, witnesses: [w] });
  await cp.start();
  await until('the checkpoint delivered', () => r.bodies.length === 1);
  assert.equal(r.attempts(), 3);
  await cp.stop();
  const [logged] = await checkpoints(store);
  assert.deepEqual(parseWitnessJson(r.bodies[0]!), logged);
});

test('a webhook that never answers holds nothing up: hand returns at once, and stop gives up after its bound', async () => {
  const r = await receiver(0, true);
  const w = createWebhookWitness(r.url, logger, { minMs: 5, maxMs: 20, drainMs: 50 });
  const store = createMemoryEventStore();
  await writeHistory(store, 1);
  const cp = createAuditCheckpoints({
    store,
    key: key.privateKey,
    logger,
    everyEvents: 1,
    everyMs: 60_000,
    pollMs: 60_000,
    witnesses: [w],
  });
  await cp.start();
  const signed = await cp.checkpoint();
  assert.notEqual(signed, null, 'signed and appended while the receiver holds the POST');
  await until('the POST arrived', () => r.attempts() >= 1);
  await cp.stop();
});
