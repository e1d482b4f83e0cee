import type { NodeState } from '../../projections/index.ts';
import type { LivenessTracker } from './livenessTracker.ts';
import type { NodePage, NodePageQuery } from './readModelTypes.ts';

// GET /v1/nodes over the read model's slots: node ids in slot order, the slots sorted by id, and
// the liveness tracker's status and liveness columns. A page costs its own size plus one pass over
// typed columns for the total; a state is built only for a spec or digest filter or to be returned.

export type PageSource = Readonly<{
  ids: readonly string[];
  /** Slots sorted by node id (sortedSlots). */
  slots: Int32Array;
  tracker: LivenessTracker;
  stateAt: (slot: number) => NodeState;
}>;

/** Slots sorted by node id; nodes added since `order` was made are sorted and merged in (O(n), not a full sort). */
export function sortedSlots(order: Int32Array, ids: readonly string[]): Int32Array {
  if (order.length === ids.length) return order;
  const fresh = Array.from({ length: ids.length - order.length }, (_, i) => order.length + i).sort((a, b) => (ids[a]! < ids[b]! ? -1 : 1));
  const merged = new Int32Array(ids.length);
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < order.length && j < fresh.length) merged[k++] = ids[order[i]!]! < ids[fresh[j]!]! ? order[i++]! : fresh[j++]!;
  while (i < order.length) merged[k++] = order[i++]!;
  while (j < fresh.length) merged[k++] = fresh[j++]!;
  return merged;
}

/** A page of nodes in node id order after `query.after`, with the filters applied and the total matching. */
export function pageOf(query: NodePageQuery, now: number, { ids, slots, tracker, stateAt }: PageSource): NodePage {
  if (query.liveness !== undefined) tracker.counts(now);
  const { status, liveness, spec, digest, prefix, after } = query;
  // Retired nodes are left out of the listing (docs/design.md §3 "Retired nodes"): a filter of its own.
  const filtered =
    status !== undefined ||
    liveness !== undefined ||
    spec !== undefined ||
    digest !== undefined ||
    prefix !== undefined ||
    tracker.retiredCount() > 0;
  // Id, status and liveness from the slot columns; the state itself only for a spec or digest.
  const matches = (slot: number): boolean => {
    if (tracker.retired(slot)) return false;
    if (prefix !== undefined && !ids[slot]!.startsWith(prefix)) return false;
    if (status !== undefined && tracker.statusOf(slot) !== status) return false;
    if (liveness !== undefined && tracker.livenessOf(slot) !== liveness) return false;
    if (spec === undefined && digest === undefined) return true;
    const st = stateAt(slot);
    if (spec !== undefined && st.sent?.specDigest !== spec) return false;
    if (digest !== undefined && st.sent?.digest !== digest && st.reported?.declared !== digest) return false;
    return true;
  };
  // First slot after the cursor: a binary search over the sorted ids.
  let lo = 0;
  if (after !== undefined) {
    let hi = slots.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (ids[slots[mid]!]! <= after) lo = mid + 1;
      else hi = mid;
    }
  }
  const out: NodeState[] = [];
  let k = lo;
  for (; k < slots.length && out.length < query.limit; k++) if (!filtered || matches(slots[k]!)) out.push(stateAt(slots[k]!));
  let more = false;
  for (; k < slots.length && !more; k++) more = !filtered || matches(slots[k]!);
  let total = slots.length;
  if (filtered) {
    total = 0;
    for (let i = 0; i < slots.length; i++) if (matches(i)) total++;
  }
  return { states: out, total, next: more && out.length > 0 ? out[out.length - 1]!.node : null };
}
