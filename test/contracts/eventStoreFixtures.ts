import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { isConvergeError } from '../../src/core/errors.ts';
import type { ErrorCode } from '../../src/core/errors.ts';
import { makeRolloutEvent } from '../../src/core/events/index.ts';
import type { ConvergeEvent, Recorded } from '../../src/core/events/index.ts';
import type { EventStore, NewEvent } from '../../src/store/index.ts';

// What the conformance suite's files (eventStore.*.contract.ts) share: the harness an adapter's
// suite gives, the events they append and a few assertions. Node names carry a random suffix so
// the suite also runs against a shared store that other runs have already written to.

export type StoreHarness = Readonly<{
  /** A store ready to use (it may hold other tests' events; tests only look at their own). */
  create: () => Promise<EventStore>;
  /** Reopen the storage behind a closed store; omitted with `reopenSkip` when that means nothing. */
  reopen?: (closed: EventStore) => Promise<EventStore>;
  reopenSkip?: string;
  /** The max event size `create` configured. */
  maxEventBytes: number;
  /** Set when the adapter cannot run here at all (the whole suite shows as skipped). */
  skip?: string;
  /** Differences the adapter documents; each skips the tests that would assert otherwise. */
  crossStreamAtomicitySkip?: string;
  crossStreamDuplicateIdSkip?: string;
}>;

/** A test's body given a store of its own, closed after it whatever the outcome. */
export type WithStore = (fn: (store: EventStore) => Promise<void>) => () => Promise<void>;

export const nodeName = (): string => `t${randomUUID().slice(0, 8)}`;
export const at = (i: number): string => new Date(Date.UTC(2024, 0, 1, 0, 0, i)).toISOString();

export const aliveSeen = (node: string, i = 0): NewEvent => ({ id: randomUUID(), type: 'AliveSeen', data: { node, seenAt: at(i) } });
export const declarationSent = (node: string, serial: number, extra = ''): NewEvent => ({
  id: randomUUID(),
  type: 'DeclarationSent',
  data: {
    node,
    serial,
    digest: 'a'.repeat(64),
    specDigest: 'b'.repeat(64),
    declaration: Buffer.from(`{"node":"${node}"}${extra}`).toString('base64'),
    signature: 'c2ln',
    keyId: 'k1',
    resourceIds: ['r1'],
    sentAt: at(serial),
  },
});
export const reportReceived = (node: string, i = 0): NewEvent => ({
  id: randomUUID(),
  type: 'ReportReceived',
  data: {
    node,
    declared: 'a'.repeat(64),
    applied: ['r1'],
    failed: {},
    refused: '',
    carried: [],
    receivedAt: at(i),
    transport: { messageId: null, redelivered: false, userId: node },
  },
});

export const rolloutStarted = (rollout: string, nodes: readonly string[]): NewEvent =>
  makeRolloutEvent('RolloutStarted', {
    rollout,
    resources: [{ id: 'r1' }],
    specDigest: 'b'.repeat(64),
    selection: { kind: 'nodes' },
    targets: nodes.length,
    waves: [nodes.length],
    asGiven: { waves: '100%', maxFailures: '0' },
    maxFailures: 0,
    waveTimeoutMs: 60_000,
    pauseMs: 0,
    startedBy: 'test',
    startedAt: at(0),
  });

export async function rejectsWith(p: Promise<unknown>, code: ErrorCode): Promise<Error> {
  let caught: unknown;
  try {
    await p;
  } catch (err) {
    caught = err;
  }
  assert.ok(caught !== undefined, `expected ${code}, but the call succeeded`);
  assert.ok(isConvergeError(caught, code), `expected ${code}, got ${String((caught as { code?: unknown }).code)}: ${String(caught)}`);
  return caught as Error;
}

export const ids = (events: readonly Recorded[]): string[] => events.map((e) => e.id);
export const stripe = (e: NewEvent): ConvergeEvent => ({ type: e.type, data: e.data }) as ConvergeEvent;

export async function collectAll(store: EventStore, options: Parameters<EventStore['readAll']>[0]): Promise<Recorded[]> {
  const out: Recorded[] = [];
  for await (const batch of store.readAll(options)) out.push(...batch);
  return out;
}
