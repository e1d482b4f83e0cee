import type { NodeState } from '../../projections/index.ts';
import { makeRolloutEvent, rolloutStreamOf } from '../core/events/index.ts';
import type { RollbackSentData } from '../core/events/index.ts';
import { nodeOutcome } from '../core/rollout/index.ts';
import type { RolloutState } from '../core/rollout/index.ts';
import type { EventStore } from '../store/port.ts';
import type { BatchItem, BatchSender } from './sendBatch.ts';
import type { HoldsReader } from './holds.ts';
import type { Holds } from '../../projections/index.ts';
import { describeMoment, specAt, specBeforeRollout } from './specAsOf.ts';
import type { Moment } from './specAsOf.ts';

// A batch of a wave's sends: every node the rollout's spec, and the RolloutSent that lists them,
// in one append call at the revision the driver decided on (docs/design.md §8, "The driver").
//
// A batch of a rollback's sends (docs/design.md §8, "Rollback"): each node is sent the exact
// resources of its declaration before this rollout's (read from that declaration's bytes, as
// `send --as-of` does), newly signed with its next serial, and the RollbackSent that lists them goes
// in the same append call, at the revision the driver decided on. A node whose previous spec is
// unknown, or that a newer declaration reached from elsewhere, is listed and not sent.
//
// Either way a node held or pinned as the batch is sent (docs/design.md §8 "Holds and pins") is
// not sent: it is listed as skipped with the code `held` or `pinned`, which spends no budget.

export type RollbackSendDeps = Readonly<{
  store: EventStore;
  sender: BatchSender;
  nodeOf: (node: string) => NodeState | undefined;
  now: () => Date;
  holds: HoldsReader;
  /** The driver's stop: a batch not appended yet is given up (sendBatch.ts `signal`). */
  signal?: AbortSignal;
}>;

type Skip = Readonly<{ node: string; code: string; reason: string }>;

/** The nodes of a batch an operator's hold or pin keeps from it, as the rollout lists them (a pin first: it is the stronger). */
function operatorSkips(h: Holds, nodes: readonly string[]): Map<string, Skip> {
  const out = new Map<string, Skip>();
  if (h.nodes.size === 0) return out;
  for (const node of nodes) {
    const x = h.nodes.get(node);
    if (x === undefined) continue;
    const [code, mark] = x.pinned !== null ? (['pinned', x.pinned] as const) : (['held', x.held!] as const);
    out.set(node, { node, code, reason: `${code} by ${mark.by} since ${mark.at}${mark.reason === '' ? '' : `: ${mark.reason}`}` });
  }
  return out;
}

type Restores = RollbackSentData['sends'][number]['restores'];

/**
 * What each node of a batch is sent: the rollout's spec, or under `asOf` the node's own spec as of
 * that moment (docs/design.md §8, "A rollout as of a moment"); a node sent nothing by then is skipped.
 */
async function waveItems(
  store: EventStore,
  s: RolloutState,
  nodes: readonly string[],
  signal: AbortSignal | undefined,
): Promise<{ items: BatchItem[]; restores: Map<string, Restores>; skipped: Skip[] }> {
  const asOf = s.started.asOf;
  if (asOf === undefined)
    return { items: nodes.map((node) => ({ node, resources: s.started.resources })), restores: new Map(), skipped: [] };
  const moment: Moment = asOf.at !== undefined ? { at: new Date(asOf.at) } : { position: BigInt(asOf.position!) };
  const upTo = BigInt(asOf.upTo);
  const items: BatchItem[] = [];
  const restores = new Map<string, Restores>();
  const skipped: Skip[] = [];
  for (const node of nodes) {
    signal?.throwIfAborted();
    const was = await specAt(store, node, moment, upTo);
    if (was === null) {
      skipped.push({ node, code: 'noneAsOf', reason: `had been sent nothing at or before ${describeMoment(moment)}: nothing to restore` });
      continue;
    }
    items.push({ node, resources: was.resources });
    restores.set(node, { serial: was.serial, digest: was.digest, specDigest: was.specDigest });
  }
  return { items, restores, skipped };
}

/**
 * Send `nodes` of `wave` the rollout's spec (or each its own, under asOf); resolves with how many
 * were sent. `next`: the nodes of the batch the driver will send after this one, signed meanwhile
 * (sendBatch.ts `ahead`; not under asOf, whose specs are read per node).
 */
export async function sendWave(
  deps: Pick<RollbackSendDeps, 'store' | 'sender' | 'now' | 'holds' | 'signal'>,
  s: RolloutState,
  wave: number,
  nodes: readonly string[],
  next: readonly string[] = [],
): Promise<number> {
  const skips = operatorSkips(await deps.holds.refresh(), nodes);
  const { items, restores, skipped } = await waveItems(
    deps.store,
    s,
    nodes.filter((node) => !skips.has(node)),
    deps.signal,
  );
  const r = await deps.sender.sendMany(items, {
    rollout: { id: s.id, wave },
    now: deps.now(),
    ...(deps.signal === undefined ? {} : { signal: deps.signal }),
    ...(s.started.asOf === undefined && next.length > 0 ? { ahead: next.map((node) => ({ node, resources: s.started.resources })) } : {}),
    // `at`: the time the declarations carry, which the RolloutSent that lists them says too.
    extra: (sent, refused, at) => [
      {
        stream: rolloutStreamOf(s.id),
        expected: s.revision,
        events: [
          makeRolloutEvent(
            'RolloutSent',
            {
              rollout: s.id,
              wave,
              sends: sent.map((x) => {
                const was = restores.get(x.node);
                return { node: x.node, serial: x.serial, digest: x.digest, ...(was === undefined ? {} : { restores: was }) };
              }),
              skipped: [
                ...skips.values(),
                ...skipped,
                ...refused.map((x) => ({ node: x.node, code: x.ok ? '' : x.code, reason: x.ok ? '' : x.message })),
              ],
              sentAt: at.toISOString(),
            },
            { revision: s.revision },
          ),
        ],
      },
    ],
  });
  return r.outcomes.filter((o) => o.ok).length;
}

type Skipped = RollbackSentData['skipped'][number];

/** Send `nodes` (a batch the driver decided on) their previous specs; resolves with how many were sent. */
export async function sendRollback(deps: RollbackSendDeps, s: RolloutState, nodes: readonly string[]): Promise<number> {
  const items: BatchItem[] = [];
  const skipped: Skipped[] = [];
  const restores = new Map<string, Restores>();
  const skips = operatorSkips(await deps.holds.refresh(), nodes);
  for (const node of nodes) {
    deps.signal?.throwIfAborted();
    const ours = s.sends.get(node);
    if (ours === undefined) continue;
    const skip = skips.get(node);
    if (skip !== undefined) {
      skipped.push(skip);
      continue;
    }
    const facts = deps.nodeOf(node);
    if (nodeOutcome(ours, undefined, facts) === 'superseded') {
      skipped.push({
        node,
        code: 'superseded',
        reason: `serial ${facts?.sent?.serial ?? '?'} reached it from elsewhere after this rollout's: not overwritten`,
      });
      continue;
    }
    const previous = await specBeforeRollout(deps.store, node, s.id);
    if (previous === null) {
      skipped.push({ node, code: 'noPrevious', reason: "this rollout's declaration was its first: no previous spec to restore" });
      continue;
    }
    items.push({ node, resources: previous.resources, wave: ours.wave });
    restores.set(node, { serial: previous.serial, digest: previous.digest, specDigest: previous.specDigest });
  }
  const at = deps.now();
  const stream = rolloutStreamOf(s.id);
  const r = await deps.sender.sendMany(items, {
    rollout: { id: s.id, wave: 1, rollback: true },
    now: at,
    ...(deps.signal === undefined ? {} : { signal: deps.signal }),
    extra: (sent, refused) => [
      {
        stream,
        expected: s.revision,
        events: [
          makeRolloutEvent(
            'RollbackSent',
            {
              rollout: s.id,
              sends: sent.map((x) => ({ node: x.node, serial: x.serial, digest: x.digest, restores: restores.get(x.node)! })),
              skipped: [...skipped, ...refused.map((x) => ({ node: x.node, code: x.ok ? '' : x.code, reason: x.ok ? '' : x.message }))],
              sentAt: at.toISOString(),
            },
            { revision: s.revision },
          ),
        ],
      },
    ],
  });
  return r.outcomes.filter((o) => o.ok).length;
}
