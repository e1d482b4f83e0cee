import { draftAlive, draftReport, draftRetire, draftSend } from '../../projections/index.ts';
import { isoText } from '../core/events/index.ts';
import type { NodeDraft } from '../../projections/index.ts';
import { eventKind } from '../store/index.ts';
import type { NodeColumns } from '../store/index.ts';

// The fast path of the draft fold: foldIntoDraft (projections/node/nodeStateFast.ts) is the definition,
// and foldEntry must leave a draft exactly as foldIntoDraft leaves it for the same event — and so,
// once published, as foldNode folds it. It reads a columnar page's typed fields instead of a
// Recorded per event, for the cold start's catch-up (ReadModel.catchUpColumns) and replay
// (replay.ts). test/readModel/foldIntoDraftFast.property.test.ts holds the two equal: a replay and
// a cold start through the columns against the per-event fold.

/**
 * Fold entry i of a columnar page (src/store/nodeColumns.ts) into the draft: the draft fold's
 * rules (projections/node/nodeStateFast.ts) on the page's typed fields, no Recorded built. A kind other
 * than the three node events moves nothing, as foldIntoDraft.
 */
export function foldEntry(d: NodeDraft, c: NodeColumns, i: number): void {
  switch (c.kind[i]) {
    // A liveness transition's time is a sign of life, as an alive's (foldIntoDraft).
    case eventKind.alive:
    case eventKind.heard:
    case eventKind.silent:
      draftAlive(d, c.position[i]!, c.revision[i]!, c.time[i]!, c.timeText[i]!);
      return;
    case eventKind.report:
      draftReport(
        d,
        c.position[i]!,
        c.revision[i]!,
        c.id[i]!,
        c.digest[i]!,
        c.time[i]!,
        c.timeText[i]!,
        c.ids[i]!,
        c.failed[i]!,
        c.refused[i]!,
        c.carried[i]!,
        c.serial[i]!,
      );
      return;
    case eventKind.send: {
      // The spec digest and ids the node holds, or ones another node holds: an event's own copy
      // kept by a working state is copied by every young-generation GC until it is promoted.
      const spec = c.specDigest[i]!;
      const ids = c.ids[i]!;
      draftSend(
        d,
        c.position[i]!,
        c.revision[i]!,
        c.digest[i]!,
        spec === d.sentSpec ? d.sentSpec : internSpec(spec),
        c.serial[i]!,
        c.time[i]!,
        c.timeText[i]!,
        sameItems(ids, d.sentIds) ? d.sentIds : internIds(ids),
      );
      return;
    }
    case eventKind.retire:
      // isoMs read the text only when isoText writes it back (isoTimeFast.ts): the event's text.
      draftRetire(d, c.position[i]!, c.revision[i]!, c.timeText[i] ?? isoText(c.time[i]!));
      return;
    default:
      return;
  }
}

// Nodes sent the same spec hold the same spec digest and resource ids: one string and one array
// for all of them instead of a copy each (memory per node, bench/scale.ts). Equal values, so a
// fold's result is the same. Bounded: a fleet with more distinct specs than this only shares less.
const internLimit = 10_000;
const specs = new Map<string, string>();
const resourceLists = new Map<string, readonly string[]>();

/** The spec digest held already with this value, else `spec` (held from now on). */
let lastSpec = '';
export function internSpec(spec: string): string {
  // Sends of one rollout wave come together: the last spec answers most (no hash of a new string).
  if (spec === lastSpec) return lastSpec;
  const held = specs.get(spec);
  if (held !== undefined) return (lastSpec = held);
  if (specs.size >= internLimit) specs.clear();
  specs.set(spec, spec);
  return (lastSpec = spec);
}

/** The id list held already with these items, else `ids` (held from now on). */
export function internIds(ids: readonly string[]): readonly string[] {
  const key = ids.length === 0 ? '' : ids.length === 1 ? ids[0]! : ids.join('\u0000');
  const held = resourceLists.get(key);
  if (held !== undefined && sameItems(held, ids)) return held;
  if (resourceLists.size >= internLimit) resourceLists.clear();
  resourceLists.set(key, ids);
  return ids;
}

const sameItems = <T>(a: readonly T[], b: readonly T[]): boolean => {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
};
