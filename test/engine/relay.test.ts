import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import pino from 'pino';
import { createRelay } from '../../src/engine/relay.ts';
import { createMetrics } from '../../src/metrics.ts';
import { makeDeclarationSent, streamOf } from '../../src/core/events/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import type { DeclarationPublisher, OutboundDeclaration } from '../../src/transport/port.ts';
import { testKey } from '../support/history.ts';
import { until } from '../support/until.ts';

// A node applies declarations in the order they reach its inbox. If serial 2 overtook serial 1
// inside one relay batch, the node would end on the older words and report them (docs/design.md §3:
// stale, behind) although nothing went wrong but our own publishing order.

test('the relay hands one node its declarations in serial order, even when a publish is slow', async () => {
  const store = createMemoryEventStore();
  const now = new Date('2026-11-29T14:02:00Z');
  for (const node of ['a', 'b']) {
    for (let serial = 1; serial <= 4; serial++) {
      const e = makeDeclarationSent({ node, serial, resources: [{ id: `r${serial}` }], key: testKey, now });
      await store.append([{ stream: streamOf(node), expected: 'any', events: [e] }]);
    }
  }
  const arrived: OutboundDeclaration[] = [];
  const first = new Set<string>();
  // The first publish to each node is slow (its inbox is being declared, say); later ones are not.
  const publisher: DeclarationPublisher = {
    async publish(d) {
      if (!first.has(d.node)) {
        first.add(d.node);
        await new Promise((r) => setTimeout(r, 30));
      }
      arrived.push(d);
    },
    close: async () => undefined,
  };
  const relay = createRelay({ store, publisher, logger: pino({ level: 'silent' }), batchSize: 100 });
  relay.start();
  await until('eight declarations published', () => arrived.length >= 8);
  await relay.stop();
  const serialsOf = (node: string): number[] =>
    arrived
      .filter((d) => d.node === node)
      .map((d) => {
        const signed = JSON.parse(d.body.toString('utf8')) as { declaration: string };
        return (JSON.parse(Buffer.from(signed.declaration, 'base64').toString('utf8')) as { serial: number }).serial;
      });
  assert.deepEqual(serialsOf('a'), [1, 2, 3, 4]);
  assert.deepEqual(serialsOf('b'), [1, 2, 3, 4]);
});

test('the relay publishes no declaration before the WAL sync covering its DeclarationSent has succeeded (SQLite group commit)', async (t) => {
  t.diagnostic('power loss cannot be tested here: the WAL sync is held by hand, the power stays on');
  const dir = mkdtempSync(join(tmpdir(), 'converge-relay-sync-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const held: (() => void)[] = [];
  let holding = true;
  const walSync = (): Promise<void> => (holding ? new Promise<void>((resolve) => void held.push(resolve)) : Promise.resolve());
  const store = createSqliteEventStore(join(dir, 'events.db'), { sync: 'group', walSync, pollMs: 10 });
  const arrived: OutboundDeclaration[] = [];
  const publisher: DeclarationPublisher = { publish: async (d) => void arrived.push(d), close: async () => undefined };
  const relay = createRelay({ store, publisher, logger: pino({ level: 'silent' }), batchSize: 100 });
  relay.start();
  const e = makeDeclarationSent({ node: 'a', serial: 1, resources: [{ id: 'web' }], key: testKey, now: new Date('2026-11-30T10:00:00Z') });
  const appended = store.append([{ stream: streamOf('a'), expected: 'any', events: [e] }]);
  await until('the commit and its sync started', () => held.length === 1);
  for (let i = 0; i < 10; i++) await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual(arrived, [], 'published a declaration a power loss could still take back');
  held.shift()!();
  await appended;
  await until('the declaration published', () => arrived.length === 1);
  // The relay's checkpoint is a commit too: from here on every sync goes through at once.
  holding = false;
  for (const r of held.splice(0)) r();
  await relay.stop();
  await store.close();
});

// Fencing (docs/operations.md, "Fencing the relay"): the relay checks its lease's bound before each
// publish, but a publish may then wait for a channel — the whole partition, when the broker link is
// cut too — and went out after the bound once the link came back. The publisher checks again right
// before it writes, with the fence the relay hands it.
test('a publish that waited past the lease bound is refused where it is written', async () => {
  const store = createMemoryEventStore();
  const now = new Date('2026-12-02T12:00:00Z');
  const e = makeDeclarationSent({ node: 'a', serial: 1, resources: [{ id: 'r1' }], key: testKey, now });
  await store.append([{ stream: streamOf('a'), expected: 'any', events: [e] }]);
  let holder = true;
  const leased = Object.assign(Object.create(store) as typeof store, {
    acquireLease: async () => ({
      lost: new Promise<void>(() => undefined),
      release: async () => undefined,
      generation: 1n,
      valid: () => holder,
    }),
  });
  let open!: () => void;
  const channel = new Promise<void>((r) => (open = r));
  const fences: boolean[] = [];
  const publisher: DeclarationPublisher = {
    async publish(d) {
      await channel; // waiting for a channel, as the AMQP publisher does while its connection is down
      fences.push(d.fence?.() ?? true);
      if (d.fence !== undefined && !d.fence()) throw new Error('fenced');
    },
    close: async () => undefined,
  };
  const relay = createRelay({ store: leased, publisher, logger: pino({ level: 'silent' }) });
  relay.start();
  try {
    await until('the relay to begin a publish', () => relay.active(), 5_000);
    await new Promise((r) => setTimeout(r, 20));
    holder = false; // the bound passes while the publish waits
    open();
    await until('the publisher to check its fence', () => fences.length > 0, 5_000);
    assert.deepEqual(fences, [false], 'the publisher saw the lease past its bound');
  } finally {
    await relay.stop();
  }
});

test('the relay counts a declaration issued when it is written, and published when the broker confirms it', async () => {
  // Apart, because a confirm can come long after its message landed (a link that stalled both ways
  // delivers it once it heals): the fault scenarios judge who wrote what, and when, by `issued`.
  const store = createMemoryEventStore();
  const e = makeDeclarationSent({ node: 'a', serial: 1, resources: [{ id: 'r1' }], key: testKey, now: new Date() });
  await store.append([{ stream: streamOf('a'), expected: 'any', events: [e] }]);
  const metrics = createMetrics();
  const count = async (name: string): Promise<number> => (await metrics.registry.getSingleMetric(name)!.get()).values[0]?.value ?? 0;
  let confirm!: () => void;
  const confirmed = new Promise<void>((r) => (confirm = r));
  const publisher: DeclarationPublisher = {
    async publish(d) {
      if (d.fence !== undefined && !d.fence()) throw new Error('fenced');
      await confirmed;
    },
    close: async () => undefined,
  };
  const relay = createRelay({ store, publisher, logger: pino({ level: 'silent' }), metrics });
  relay.start();
  try {
    await until('the declaration to be issued', async () => (await count('converge_relay_issued_total')) === 1, 5_000);
    assert.equal(await count('converge_relay_published_total'), 0, 'not confirmed yet');
    confirm();
    await until('the confirm to count', async () => (await count('converge_relay_published_total')) === 1, 5_000);
    assert.equal(await count('converge_relay_issued_total'), 1, 'written once');
  } finally {
    await relay.stop();
  }
});
