import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import type { EventStore, LeaseHold } from '../../src/store/index.ts';
import { whileLeased } from '../../src/store/whileLeased.ts';
import type { WhileLeasedOptions } from '../../src/store/whileLeased.ts';
import { until } from '../support/until.ts';

// The one loop the relay and the rollout driver play their role in (src/store/whileLeased.ts):
// ask for the lease, run while it is held, give it up when lost or stopped, ask again; a failed
// ask is tried again after a pause, and stopping ends a wait for the lease or that pause at once.

/** A store whose lease the test hands out, takes away, or fails to answer about, one ask at a time. */
function leaseStore() {
  type Ask = { name: string; signal: AbortSignal; grant: () => Hold; fail: (err: Error) => void };
  type Hold = { lose: () => void; released: () => boolean };
  const asks: Ask[] = [];
  const store: Pick<EventStore, 'acquireLease'> = {
    acquireLease: (name, signal) =>
      new Promise<LeaseHold | null>((resolve, reject) => {
        // As the stores do: a wait for the lease ends with null once the caller stops.
        signal.addEventListener('abort', () => resolve(null), { once: true });
        asks.push({
          name,
          signal,
          fail: reject,
          grant: () => {
            let lose: () => void = () => undefined;
            let released = false;
            const lost = new Promise<void>((r) => (lose = r));
            resolve({
              lost: lost.then(() => (released ? new Promise<void>(() => undefined) : undefined)),
              release: async () => void (released = true),
            });
            return { lose, released: () => released };
          },
        });
      }),
  };
  return { store, asks };
}

/** A logger that keeps each line as "<level> <message>". */
function recordingLogger() {
  const lines: string[] = [];
  const logger = pino(
    { level: 'info' },
    {
      write: (line: string) => {
        const { level, msg } = JSON.parse(line) as { level: number; msg: string };
        lines.push(`${pino.levels.labels[level]} ${msg}`);
      },
    },
  );
  return { logger, lines };
}

/** whileLeased over `store`, recording each run of the role: its signal, and whether it has ended. */
function play(store: Pick<EventStore, 'acquireLease'>, options: Partial<WhileLeasedOptions> = {}) {
  const stop = new AbortController();
  const { logger, lines } = recordingLogger();
  const runs: { held: AbortSignal; ended: boolean }[] = [];
  const done = whileLeased({
    store,
    name: 'role',
    signal: stop.signal,
    logger,
    taken: 'taken',
    lost: 'lost',
    run: async (held) => {
      const r = { held, ended: false };
      runs.push(r);
      await new Promise<void>((resolve) => held.addEventListener('abort', () => resolve(), { once: true }));
      r.ended = true;
    },
    ...options,
  });
  return { stop, done, runs, lines };
}

test('the role runs while the lease is held; a lost lease ends it, is given up, logged, and asked for again', async () => {
  const { store, asks } = leaseStore();
  const p = play(store);
  await until('the first ask', () => asks.length === 1);
  assert.equal(asks[0]?.name, 'role');
  assert.equal(p.runs.length, 0, 'nothing runs before the lease is held');

  const first = asks[0]!.grant();
  await until('the role to run', () => p.runs.length === 1);
  assert.equal(p.runs[0]?.held.aborted, false);
  assert.deepEqual(p.lines, ['info taken']);

  first.lose();
  await until('the next ask', () => asks.length === 2);
  assert.equal(p.runs[0]?.ended, true, 'the role ended when the lease was lost');
  assert.equal(first.released(), true, 'the lost lease was given up');
  assert.deepEqual(p.lines, ['info taken', 'warn lost']);

  asks[1]!.grant();
  await until('the role to run again', () => p.runs.length === 2);
  p.stop.abort();
  await p.done;
  assert.equal(p.runs[1]?.ended, true);
  assert.deepEqual(p.lines, ['info taken', 'warn lost', 'info taken'], 'stopping is not logged as a loss');
  assert.equal(asks.length, 2, 'no ask after the stop');
});

test('stopping while holding the lease ends the role and gives the lease up before resolving', async () => {
  const { store, asks } = leaseStore();
  const p = play(store);
  await until('the ask', () => asks.length === 1);
  const hold = asks[0]!.grant();
  await until('the role to run', () => p.runs.length === 1);
  p.stop.abort();
  await p.done;
  assert.equal(p.runs[0]?.ended, true);
  assert.equal(hold.released(), true);
});

test('a failed ask is logged and asked again after the pause', async () => {
  const { store, asks } = leaseStore();
  const p = play(store, { retryMs: 1 });
  await until('the first ask', () => asks.length === 1);
  asks[0]!.fail(new Error('store away'));
  await until('the second ask', () => asks.length === 2);
  assert.deepEqual(p.lines, ['warn cannot ask the store for the role lease; trying again']);
  asks[1]!.grant();
  await until('the role to run', () => p.runs.length === 1);
  p.stop.abort();
  await p.done;
});

test('stopping ends a wait for the lease, and the pause after a failed ask, at once', async () => {
  {
    const { store, asks } = leaseStore();
    const p = play(store);
    await until('the ask', () => asks.length === 1);
    p.stop.abort();
    await p.done;
    assert.equal(p.runs.length, 0);
  }
  {
    // The pause is an hour: only a stop that ends it lets this test finish.
    const { store, asks } = leaseStore();
    const p = play(store, { retryMs: 3_600_000 });
    await until('the ask', () => asks.length === 1);
    asks[0]!.fail(new Error('store away'));
    await until('the failure logged', () => p.lines.length === 1);
    p.stop.abort();
    await p.done;
    assert.equal(asks.length, 1);
    assert.equal(p.runs.length, 0);
  }
});

test('a role that throws gives the lease up, is logged, and plays again after the pause', async () => {
  // Before: the error ended the loop, so a rollout driver whose store failed one read stopped
  // driving for good while the engine kept serving.
  const { store, asks } = leaseStore();
  let runs = 0;
  const p = play(store, {
    retryMs: 1,
    run: async (held) => {
      runs++;
      if (runs === 1) throw new Error('cannot read the checkpoint');
      await new Promise<void>((resolve) => held.addEventListener('abort', () => resolve(), { once: true }));
    },
  });
  await until('the ask', () => asks.length === 1);
  const first = asks[0]!.grant();
  await until('the second ask', () => asks.length === 2);
  assert.equal(first.released(), true, 'the lease was given up when the role threw');
  assert.deepEqual(p.lines, ['info taken', 'error the role role failed; playing it again after a pause']);
  asks[1]!.grant();
  await until('the role to run again', () => runs === 2);
  p.stop.abort();
  await p.done;
});

test('on a store with no lease, a role that throws plays again after the pause; stopping ends the pause', async () => {
  let runs = 0;
  const p = play(
    {},
    {
      retryMs: 1,
      run: async (held) => {
        runs++;
        if (runs <= 2) throw new Error('store away');
        await new Promise<void>((resolve) => held.addEventListener('abort', () => resolve(), { once: true }));
      },
    },
  );
  await until('the third run', () => runs === 3);
  assert.deepEqual(p.lines, [
    'error the role role failed; playing it again after a pause',
    'error the role role failed; playing it again after a pause',
  ]);
  p.stop.abort();
  await p.done;

  // The pause is an hour: only a stop that ends it lets this part finish.
  const q = play({}, { retryMs: 3_600_000, run: async () => Promise.reject(new Error('store away')) });
  await until('the failure logged', () => q.lines.length === 1);
  q.stop.abort();
  await q.done;
});

test('a store with no lease (one engine’s) runs the role at once, until stopped', async () => {
  const p = play({});
  assert.equal(p.runs.length, 1, 'running before any turn of the event loop');
  p.stop.abort();
  await p.done;
  assert.equal(p.runs[0]?.ended, true);
});

test('a role that ran well for a while before it threw pauses the first pause again, not the longest its earlier failures reached', async () => {
  // failures counted every throw since the engine started, so after a few store hiccups on the
  // first day, each later one stopped the role for the longest pause (30 retryMs) for good.
  const retryMs = 20;
  const starts: number[] = [];
  const p = play(
    {},
    {
      retryMs,
      run: async (held) => {
        starts.push(performance.now());
        // Six failures in a row reach the longest pause; the seventh play runs well for a while.
        if (starts.length === 7) await new Promise((r) => setTimeout(r, 40 * retryMs));
        if (starts.length <= 7) throw new Error('store away');
        await new Promise<void>((resolve) => held.addEventListener('abort', () => resolve(), { once: true }));
      },
    },
  );
  await until('the eighth play', () => starts.length === 8, { timeoutMs: 20_000 });
  const pause = starts[7]! - starts[6]! - 40 * retryMs;
  assert.ok(
    pause < 15 * retryMs,
    `paused ${Math.round(pause)} ms after a play that ran ${40 * retryMs} ms; the first pause is ${retryMs} ms`,
  );
  p.stop.abort();
  await p.done;
});
