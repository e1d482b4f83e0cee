import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import pino from 'pino';
import { ConvergeError } from '../../src/core/errors.ts';
import { streamOf } from '../../src/core/events/index.ts';
import { createMetrics } from '../../src/metrics.ts';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import type { EventStore, StreamWrite } from '../../src/store/index.ts';
import { apiHarness } from '../support/apiHarness.ts';
import { historyInStore } from '../support/history.ts';
import { describeOnPostgres, scratchSchema } from '../support/postgres.ts';
import { until } from '../support/until.ts';

// A store may hold an event of a type this Converge does not know: a newer release wrote it
// while this one shared the store (docs/operations.md "Upgrades"). Reading it must fail loudly,
// naming the type and the position, and the projections must stop before it, as they stop on a
// fold that fails: a read model that stepped over it would serve states the newer release does
// not agree with, and one that retried forever would say ready while the store moved on.

const madeUp = 'NodeTeleported';

/** Append an event of a type no Converge has, as a newer one would append one of its own. */
async function appendUnknown(store: EventStore, node: string): Promise<bigint> {
  const write = {
    stream: streamOf(node),
    expected: 'any',
    events: [{ id: crypto.randomUUID(), type: madeUp, data: { node, to: 'elsewhere' } }],
  } as unknown as StreamWrite;
  const r = await store.append([write]);
  return r.position!;
}

/** Every batch readAll yields, until it throws; the error it threw. */
async function readAllError(store: EventStore): Promise<unknown> {
  try {
    for await (const batch of store.readAll()) void batch;
  } catch (err) {
    return err;
  }
  return null;
}

function assertNamesTheEvent(err: unknown, position: bigint, node: string): void {
  assert.ok(err instanceof ConvergeError, `a ConvergeError, got ${String(err)}`);
  assert.equal(err.code, 'CONVERGE_ERR_EVENT_INVALID');
  assert.match(err.message, new RegExp(`"${madeUp}"`));
  assert.match(err.message, new RegExp(`position ${position}\\b`));
  assert.equal(err.details?.['position'], position.toString());
  assert.equal(err.details?.['type'], madeUp);
  assert.equal(err.details?.['stream'], streamOf(node));
}

async function readsRefuseTheEvent(store: EventStore): Promise<void> {
  const h = historyInStore(store);
  await h.send('u1');
  const at = await appendUnknown(store, 'u1');
  await h.report('u1');
  assertNamesTheEvent(await readAllError(store), at, 'u1');
  await assert.rejects(store.readStream(streamOf('u1')), (err) => {
    assertNamesTheEvent(err, at, 'u1');
    return true;
  });
}

test('memory store: a read meeting an unknown event type fails naming the type, the position and the stream', async () => {
  const store = createMemoryEventStore();
  try {
    await readsRefuseTheEvent(store);
  } finally {
    await store.close();
  }
});

test('SQLite store: a read meeting an unknown event type fails naming the type, the position and the stream', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'converge-unknown-'));
  const store = createSqliteEventStore(join(dir, 'store.db'));
  try {
    await readsRefuseTheEvent(store);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

describeOnPostgres('PostgreSQL store and an unknown event type', () => {
  test('a read meeting an unknown event type fails naming the type, the position and the stream', async () => {
    const scratch = scratchSchema('converge_unknown');
    const store = createPostgresEventStore(scratch.url);
    try {
      await readsRefuseTheEvent(store);
    } finally {
      await store.close();
      await scratch.drop();
    }
  });
});

type LogLine = { level: number; msg: string; position?: string; type?: string };

function runnerOn(store: EventStore) {
  const lines: string[] = [];
  const log = pino({ level: 'info' }, { write: (l: string) => void lines.push(l) });
  const metrics = createMetrics();
  const runner = createProjectionRunner({ store, logger: log, metrics });
  const errors = (): LogLine[] => lines.map((l) => JSON.parse(l) as LogLine).filter((l) => l.level >= 50);
  return { runner, metrics, errors };
}

async function assertStoppedBefore(r: ReturnType<typeof runnerOn>, at: bigint): Promise<void> {
  await until('the projection to stop on the unknown event', () => r.runner.failure() !== null);
  assert.equal(r.runner.isReady(), false);
  assert.deepEqual({ position: r.runner.failure()?.position, type: r.runner.failure()?.type }, { position: at, type: madeUp });
  assert.equal(r.runner.readModel.position(), at - 1n, 'every event before it is folded, none after it');
  assert.equal(r.runner.readModel.get('after'), undefined, 'nothing after the unknown event is folded');
  assert.match(await r.metrics.registry.getSingleMetricAsString('converge_projection_failed'), /converge_projection_failed 1/);
  const stopped = r.errors().filter((l) => l.position === at.toString() && l.type === madeUp);
  assert.equal(stopped.length, 1, `one error log names the event: ${JSON.stringify(r.errors())}`);
}

test(
  'a cold start over an unknown event folds what is before it and stops there: not ready, projection_failed 1, one error naming it',
  { timeout: 60_000 },
  async (t) => {
    const store = createMemoryEventStore({ readBatchSize: 4 });
    const h = historyInStore(store);
    for (let i = 0; i < 6; i++) await h.alive(`n${i}`);
    const at = await appendUnknown(store, 'n1');
    await h.alive('after');
    const r = runnerOn(store);
    t.after(() => r.runner.stop());
    await r.runner.start();
    await assert.rejects(r.runner.caughtUp(), /NodeTeleported/);
    await assertStoppedBefore(r, at);
  },
);

test(
  'a live engine meeting an unknown event stops there instead of saying ready while the store moves on',
  { timeout: 60_000 },
  async (t) => {
    const store = createMemoryEventStore();
    const h = historyInStore(store);
    await h.alive('n1');
    const r = runnerOn(store);
    t.after(() => r.runner.stop());
    await r.runner.start();
    await r.runner.caughtUp();
    assert.equal(r.runner.isReady(), true);
    await h.alive('n2');
    const at = await appendUnknown(store, 'n1');
    await h.alive('after');
    await assertStoppedBefore(r, at);
  },
);

test('/readyz answers 503 CONVERGE_ERR_PROJECTION_FAILED naming the unknown type and its position', { timeout: 60_000 }, async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  await h.history.alive('r1');
  await h.settle();
  const at = await appendUnknown(h.store, 'r1');
  await until('the projection to stop', () => !h.runner.isReady());
  const ready = await h.app.inject({ url: '/readyz' });
  assert.equal(ready.statusCode, 503);
  assert.equal(ready.json().code, 'CONVERGE_ERR_PROJECTION_FAILED');
  assert.equal(ready.json().details.position, at.toString());
  assert.equal(ready.json().details.type, madeUp);
  assert.match(ready.json().detail, /NodeTeleported/);
});
