import { sleep } from '../support/until.ts';
import type { Accepted } from '../support/faults/simulatedFleet.ts';
import type { LogLine } from '../support/serveProcess.ts';

// The load of the partition scenarios (test/faults/partitionScenario.ts): reports from simulated
// nodes, declarations POSTed through the engines' APIs, and the engines' counters read from their
// /metrics while it runs.

const DECLARE_EVERY_MS = 150;
/** A POST to an engine cut from its store hangs: give up on it after this long (it may still be recorded later). */
const POST_TIMEOUT_MS = 4_000;

/** With CONVERGE_FAULT_TRACE set, each step of a scenario on stderr with the time since `t0`. */
export const tracer =
  (t0: number) =>
  (what: string): void => {
    if (process.env['CONVERGE_FAULT_TRACE'] !== undefined) process.stderr.write(`  [${((Date.now() - t0) / 1000).toFixed(1)} s] ${what}\n`);
  };

export type Api = Readonly<{ name: string; url: string }>;

export type Declarer = Readonly<{
  accepted: readonly Accepted[];
  /** POSTs not answered 202: unanswered (timed out or reset), 409, other. */
  unanswered: readonly string[];
  conflicts: readonly string[];
  otherRefusals: readonly string[];
  /** POST through these APIs in turn from now on (none: pause). */
  use: (apis: readonly Api[]) => void;
  stop: () => Promise<void>;
}>;

/** One declaration at a time, each to the next node, through the APIs in turn. */
export function startDeclarer(nodes: readonly string[], auth: Readonly<Record<string, string>>, initial: readonly Api[]): Declarer {
  const accepted: Accepted[] = [];
  const unanswered: string[] = [];
  const conflicts: string[] = [];
  const otherRefusals: string[] = [];
  let apis = initial;
  let running = true;
  const loop = (async () => {
    for (let i = 0; running; i++) {
      const api = apis[i % Math.max(1, apis.length)];
      if (api !== undefined) {
        const node = nodes[i % nodes.length]!;
        const at = Date.now();
        try {
          const res = await fetch(`${api.url}/v1/nodes/${node}/declarations`, {
            method: 'POST',
            headers: { ...auth, 'content-type': 'application/json' },
            body: JSON.stringify({ resources: [{ id: 'web', image: `web:${i}` }] }),
            signal: AbortSignal.timeout(POST_TIMEOUT_MS),
          });
          if (res.status === 202)
            accepted.push({ digest: ((await res.json()) as { digest: string }).digest, node, via: api.name, at, answeredAt: Date.now() });
          else (res.status === 409 ? conflicts : otherRefusals).push(`${api.name}: ${res.status} ${await res.text()}`);
        } catch (e) {
          unanswered.push(`${api.name}: ${(e as Error).message}`);
        }
      }
      await sleep(DECLARE_EVERY_MS);
    }
  })();
  return {
    accepted,
    unanswered,
    conflicts,
    otherRefusals,
    use: (next) => {
      apis = next;
    },
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

/** Reports appended; declarations the broker confirmed; declarations written (a confirm can come long after its write). */
export type Counters = Readonly<{ reports: number; published: number; issued: number }>;
type Key = keyof Counters;

/**
 * A rise of a counter between two reads of /metrics: it happened after the earlier read was sent
 * (that read's value was taken no sooner) and before the later one was answered.
 */
export type Rise = Readonly<{ after: number; by: number }>;

export type CounterWatch = Readonly<{
  /** The latest values read (null before the first). */
  now: () => Counters | null;
  /** When `key` was first seen higher than at the first read (null: not yet). */
  changedAt: (key: Key) => number | null;
  /** Every rise of `key` seen so far, in order. */
  rises: (key: Key) => readonly Rise[];
  /** Whether a read was sent at or after `from` and answered by `to`: the counters were seen within [from, to]. */
  readWithin: (from: number, to: number) => boolean;
  stop: () => void;
}>;

const series: Record<Key, RegExp> = {
  reports: /^converge_events_appended_total\{type="ReportReceived"\} /,
  published: /^converge_relay_published_total /,
  issued: /^converge_relay_issued_total /,
};

/**
 * Read an engine's /metrics every 50 ms. Each rise is kept with the span it lies in (the earlier
 * read's sending to the later one's answer), not only when it was seen: a read that waited (an
 * engine busy, or one whose scrape waited on a store cut off) sees late what happened long before.
 */
export function watchCounters(base: string): CounterWatch {
  let latest: Counters | null = null;
  /** When the read that gave `latest` was sent. */
  let latestSent = 0;
  const reads: { sent: number; at: number }[] = [];
  const rises: { key: Key; after: number; by: number }[] = [];
  let running = true;
  void (async () => {
    while (running) {
      const sent = Date.now();
      try {
        const res = await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(2_000) });
        // An error's body has none of the series: read as zeros, the next good read would look like a rise of each.
        if (!res.ok) throw new Error(`/metrics answered ${res.status}`);
        const text = await res.text();
        const read = (k: Key): number => {
          const line = text.split('\n').find((l) => series[k].test(l));
          return line === undefined ? 0 : Number(line.split(' ').pop());
        };
        const next = { reports: read('reports'), published: read('published'), issued: read('issued') };
        const at = Date.now();
        if (latest !== null)
          for (const k of ['reports', 'published', 'issued'] as const)
            if (next[k] > latest[k]) rises.push({ key: k, after: latestSent, by: at });
        latest = next;
        latestSent = sent;
        reads.push({ sent, at });
      } catch {
        // the engine is busy or stopping: read again
      }
      await sleep(50);
    }
  })();
  return {
    now: () => latest,
    changedAt: (key) => rises.find((r) => r.key === key)?.by ?? null,
    rises: (key) => rises.filter((r) => r.key === key),
    readWithin: (from, to) => reads.some((r) => r.sent >= from && r.at <= to),
    stop: () => {
      running = false;
    },
  };
}

/**
 * The rises known to lie within [from, until]: after a read sent at or after `from`, seen by `until`.
 * A rise across either end may lie on either side of it and is left out.
 */
export const risesWithin = (rises: readonly Rise[], from: number, until: number): Rise[] =>
  rises.filter((r) => r.after >= from && r.by <= until);

/** When the engine wrote a log line, by its own stamp (serve logs ISO times): not when the line reached the test. */
export const writtenAt = (line: LogLine): number => {
  try {
    const time = Date.parse(String((JSON.parse(line.raw) as { time?: unknown }).time));
    return Number.isNaN(time) ? line.at : time;
  } catch {
    return line.at;
  }
};
