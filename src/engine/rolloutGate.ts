import { makeRolloutEvent } from '../core/events/index.ts';
import type { RolloutEvent, WithId } from '../core/events/index.ts';
import type { RolloutState } from '../core/rollout/index.ts';

// Pre-wave gates (docs/design.md §8 "Gates"): before each wave after the first, the plan's gate
// URL is POSTed a small JSON, and only a 2xx within its timeout opens the wave. The call runs on
// its own: the driver's loop never awaits it, so one rollout waiting on a slow gate holds up no
// other. Its answer, when it comes, wakes the driver, which records it (WaveGateChecked) at the
// revision it decided on; a wave held so is asked again on the monotonic clock, with backoff.

export type GateKeeperOptions = Readonly<{
  /** A monotonic clock (ms): when to ask again. */
  monotonic: () => number;
  /** The wall clock, for the time the answer is recorded at. */
  now: () => Date;
  /** Decide again (an answer came). */
  wake: () => void;
  /** First wait before asking again after a no (ms; doubled each time, up to maxRetryMs). */
  retryMs?: number;
  maxRetryMs?: number;
  fetch?: typeof fetch;
}>;

type Answer = Readonly<{ passed: boolean; status: number | null; detail: string }>;

type Entry = {
  wave: number;
  calling: boolean;
  answer: Answer | null;
  /** Monotonic time before which it does not ask again. */
  retryAt: number;
  /** Ends the call under way (the driver stopped). */
  abort: AbortController | null;
};

export type GateKeeper = Readonly<{
  /**
   * The gate's step for `wave` of `s`: an event to record (an answer came), or how long until the
   * driver looks again (ms; an answer wakes it before).
   */
  step: (s: RolloutState, wave: number) => WithId<RolloutEvent> | number;
  forget: (rollout: string) => void;
  /**
   * End every call under way and forget their answers (the driver stops): an open request keeps
   * the process alive until the gate's timeout, up to 5 minutes. A later start asks again.
   */
  stop: () => void;
}>;

/** What the gate is told: enough to judge the rollout so far without reading it. */
export const gateBody = (s: RolloutState, wave: number): Record<string, unknown> => ({
  rollout: s.id,
  wave,
  waves: s.waves.length,
  targets: s.started.targets,
  specDigest: s.started.specDigest,
  done: s.done,
  failed: s.failed,
  superseded: s.superseded,
});

export function createGateKeeper(options: GateKeeperOptions): GateKeeper {
  const retryMs = options.retryMs ?? 1_000;
  const maxRetryMs = options.maxRetryMs ?? 60_000;
  const post = options.fetch ?? fetch;
  const entries = new Map<string, Entry>();

  async function call(url: string, timeoutMs: number, body: Record<string, unknown>, stopped: AbortSignal): Promise<Answer> {
    try {
      const r = await post(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.any([AbortSignal.timeout(timeoutMs), stopped]),
      });
      const text = (await r.text().catch(() => '')).slice(0, 200);
      const passed = r.status >= 200 && r.status < 300;
      return { passed, status: r.status, detail: `${r.status}${text === '' ? '' : `: ${text}`}` };
    } catch (err) {
      const e = err as Error;
      const detail =
        e.name === 'TimeoutError'
          ? `no answer within ${timeoutMs} ms`
          : `${e.message}${e.cause instanceof Error ? `: ${e.cause.message}` : ''}`;
      return { passed: false, status: null, detail };
    }
  }

  return {
    step(s, wave) {
      const gate = s.started.gate;
      if (gate === undefined) return 0;
      let entry = entries.get(s.id);
      if (entry === undefined || entry.wave !== wave) {
        entry = { wave, calling: false, answer: null, retryAt: Number.NEGATIVE_INFINITY, abort: null };
        entries.set(s.id, entry);
      }
      if (entry.answer !== null) {
        const a = entry.answer;
        entry.answer = null;
        const attempt = (s.gate?.wave === wave ? s.gate.attempts : 0) + 1;
        if (!a.passed) entry.retryAt = options.monotonic() + Math.min(maxRetryMs, retryMs * 2 ** (attempt - 1));
        const data = {
          rollout: s.id,
          wave,
          passed: a.passed,
          status: a.status,
          detail: a.detail,
          attempt,
          at: options.now().toISOString(),
        };
        return makeRolloutEvent('WaveGateChecked', data, { revision: s.revision });
      }
      if (entry.calling) return maxRetryMs;
      const wait = entry.retryAt - options.monotonic();
      if (wait > 0) return wait;
      entry.calling = true;
      const e = entry;
      const abort = new AbortController();
      e.abort = abort;
      void call(gate.url, gate.timeoutMs, gateBody(s, wave), abort.signal).then((a) => {
        e.abort = null;
        // Ended by the driver's stop: no answer from the gate, so nothing to record.
        if (abort.signal.aborted) return;
        e.calling = false;
        e.answer = a;
        options.wake();
      });
      return maxRetryMs;
    },
    forget: (rollout) => void entries.delete(rollout),
    stop: () => {
      for (const e of entries.values()) e.abort?.abort();
      entries.clear();
    },
  };
}
