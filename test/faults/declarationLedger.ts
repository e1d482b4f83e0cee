import type { Accepted, Receipt } from '../support/faults/simulatedFleet.ts';

// What the nodes received of what the APIs accepted, for the fault scenarios that run engines as
// processes: every declaration a node takes from its inbox is recorded (digest, serial, when)
// before the node handles it (test/support/faults/simulatedFleet.ts), and the counts below are
// taken from those records.

export type LedgerCounts = Readonly<{
  /** Accepted declarations received at least once. */
  received: number;
  /** Accepted, never received, and a later declaration to the same node was: replaced in the node's inbox (it keeps one). */
  superseded: number;
  /** Accepted, never received, and nothing later to its node received either. */
  undelivered: string[];
  /** Digests received more than once, with how often. */
  repeated: [string, number][];
  /** Receipts of a digest not seen before whose serial is below one its node already received. */
  outOfOrder: Receipt[];
  /** Repeats that came after a newer declaration to the same node (the node would see an older one again). */
  repeatsAfterNewer: number;
}>;

export function countLedger(accepted: readonly Accepted[], receipts: readonly Receipt[]): LedgerCounts {
  const times = new Map<string, number>();
  for (const r of receipts) times.set(r.digest, (times.get(r.digest) ?? 0) + 1);
  let received = 0;
  let superseded = 0;
  const undelivered: string[] = [];
  // A declaration accepted after another to its node has a higher serial; "later received" is read by acceptance order.
  for (const [i, d] of accepted.entries()) {
    if (times.has(d.digest)) received++;
    else if (accepted.slice(i + 1).some((l) => l.node === d.node && times.has(l.digest))) superseded++;
    else undelivered.push(`${d.node}:${d.digest.slice(0, 12)} via ${d.via}`);
  }
  const seen = new Set<string>();
  const high = new Map<string, number>();
  const outOfOrder: Receipt[] = [];
  let repeatsAfterNewer = 0;
  for (const r of receipts) {
    const top = high.get(r.node) ?? 0;
    if (seen.has(r.digest)) {
      if (r.serial < top) repeatsAfterNewer++;
    } else if (r.serial < top) outOfOrder.push(r);
    seen.add(r.digest);
    high.set(r.node, Math.max(top, r.serial));
  }
  return { received, superseded, undelivered, repeated: [...times].filter(([, n]) => n > 1), outOfOrder, repeatsAfterNewer };
}
