import { createRaceScanner, defaultGraceMs, eventTime, timeline } from '../../projections/index.ts';
import type { DeclarationOutcome, NodeStatus, ReportClass } from '../../projections/index.ts';
import { isNodeEvent } from '../core/events/index.ts';
import type { NodeEvent, Recorded } from '../core/events/index.ts';
import type { EventStore } from '../store/index.ts';
import { readNodeStream } from './queries.ts';

// A node's history as the dashboard shows it: each report classified as the fold saw
// it, each race marked (a report the old clock rule would have counted as caught up, docs/design.md §1 and
// node-side/000_43ee4d2afc08e8d3.txt), each declaration's outcome and latency, and each sign of life
// that ended a silence longer than the grace period (in a store written before liveness transitions;
// after, each NodeHeard that ends a recorded NodeSilent). A declaration's outcome depends on what came
// after it, so the node's whole stream is folded per page: the cost is the node's history, never
// the fleet's.

export type TimelineView = Readonly<{
  position: string;
  type: NodeEvent['type'];
  at: string;
  digest: string | null;
  serial: number | null;
  class: ReportClass | null;
  duplicate: boolean;
  status: NodeStatus;
  race: Readonly<{ sentSerial: number; sentDigest: string; sentAt: string }> | null;
  silentForMs: number | null;
  declaration: Readonly<{
    outcome: DeclarationOutcome['outcome'];
    acknowledgedAt: string | null;
    latencyMs: number | null;
    supersededAt: string | null;
    resourceIds: readonly string[];
  }> | null;
  report: Readonly<{
    applied: readonly string[];
    failed: Readonly<Record<string, string>>;
    refused: string;
    carried: readonly number[];
  }> | null;
}>;

export type TimelinePage = Readonly<{ node: string; events: number; entries: readonly TimelineView[]; next: string | null }>;

/** Every event of the node, oldest first, with what the dashboard says about it. */
export function describeTimeline(node: string, stream: readonly Recorded[], graceMs: number = defaultGraceMs): TimelineView[] {
  const events = stream.filter(isNodeEvent);
  const t = timeline(node, events);
  const races = createRaceScanner();
  const outcomes = new Map(t.declarations.map((d) => [d.serial, d]));
  let lastSeenMs: number | null = null;
  let lastTransition: 'NodeHeard' | 'NodeSilent' | null = null;
  return t.entries.map((entry, i) => {
    const e = events[i]!;
    const race = races.push(e);
    let silentForMs: number | null = null;
    if (e.type === 'NodeHeard' || e.type === 'NodeSilent') {
      // Recorded transitions say it themselves (docs/design.md §3): heard again after a recorded
      // silence, silent since its last-seen time — whatever grace this reader has in mind.
      if (e.type === 'NodeHeard' && lastTransition === 'NodeSilent' && e.data.lastSeenBefore !== null)
        silentForMs = Date.parse(e.data.at) - Date.parse(e.data.lastSeenBefore);
      lastTransition = e.type;
      const seen = Date.parse(e.type === 'NodeHeard' ? e.data.at : e.data.lastSeenAt);
      if (lastSeenMs === null || seen > lastSeenMs) lastSeenMs = seen;
    } else if (e.type !== 'DeclarationSent') {
      const seen = Date.parse(eventTime(e));
      if (lastSeenMs !== null && seen - lastSeenMs > graceMs) silentForMs = seen - lastSeenMs;
      if (lastSeenMs === null || seen > lastSeenMs) lastSeenMs = seen;
    }
    const outcome = e.type === 'DeclarationSent' ? outcomes.get(e.data.serial) : undefined;
    return {
      position: entry.position.toString(),
      type: entry.type,
      at: entry.at,
      digest: entry.digest,
      serial: entry.serial,
      class: entry.class,
      duplicate: entry.duplicate,
      status: entry.status,
      race: race === null ? null : { sentSerial: race.currentSerial, sentDigest: race.currentDigest, sentAt: race.sentAt },
      silentForMs,
      declaration:
        e.type !== 'DeclarationSent' || outcome === undefined
          ? null
          : {
              outcome: outcome.outcome,
              acknowledgedAt: outcome.acknowledgedAt,
              latencyMs: outcome.latencyMs,
              supersededAt: outcome.supersededAt,
              resourceIds: e.data.resourceIds,
            },
      report:
        e.type === 'ReportReceived'
          ? { applied: e.data.applied, failed: e.data.failed, refused: e.data.refused, carried: e.data.carried }
          : null,
    };
  });
}

/** The node's timeline newest first, `limit` entries below `before` (exclusive); `next` pages on. */
export async function timelinePage(
  store: EventStore,
  node: string,
  limit: number,
  before: bigint | null,
  graceMs?: number,
): Promise<TimelinePage> {
  const events = await readNodeStream(store, node);
  const all = describeTimeline(node, events, graceMs);
  let end = all.length;
  if (before !== null) while (end > 0 && BigInt(all[end - 1]!.position) >= before) end--;
  const start = Math.max(0, end - limit);
  const entries = all.slice(start, end).reverse();
  return { node, events: all.length, entries, next: start > 0 ? (entries.at(-1)?.position ?? null) : null };
}
