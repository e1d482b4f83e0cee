import { ConvergeError } from '../core/errors.ts';
import { streamOf } from '../core/events/index.ts';
import { sleep } from '../retry.ts';
import type { EventStore } from '../store/port.ts';
import { foldNodeEvents } from '../../projections/index.ts';
import type { NodeState } from '../../projections/index.ts';

// What a send is decided on, and what it does when its append finds the node's stream moved.
// The append names the revision the send was decided at, which guards two things: the serial
// (last + 1, so two concurrent sends cannot take the same one) and the carried ports (checked
// against the latest report before the declaration in the stream). When the stream moved, only
// the events after that revision are read: another send among them took the serial (a lost race,
// counted against `maxAttempts`); the node's own reports and alives only moved the stream, so the
// same declaration is appended again at the new revision once its ports are checked against the
// newer report (counted against `maxMoves`, a bound the node's report rate alone should never reach).

export type LoadNode = (node: string) => Promise<Pick<NodeState, 'revision' | 'carried' | 'sent'>>;

/** What a send is decided on: the node stream's revision, the latest serial sent, the ports the latest report carries. */
export type SendView = Readonly<{ revision: bigint; carried: readonly number[]; serial: number }>;

/** How a sender loads a node's view before its first append: from `loadNode` when given (a read model), else from the store. */
export const sendViewLoader =
  (store: EventStore, loadNode: LoadNode | undefined) =>
  async (node: string): Promise<SendView> => {
    if (loadNode === undefined) return (await catchUpSendView(store, node, null)).view;
    const s = await loadNode(node);
    return { revision: s.revision, carried: s.carried, serial: s.sent?.serial ?? 0 };
  };

/**
 * `from` brought up to the store's head by reading only the node's events after it (all of them
 * for null); `declared` says whether one of those was a send.
 */
export async function catchUpSendView(
  store: EventStore,
  node: string,
  from: SendView | null,
): Promise<{ view: SendView; declared: boolean }> {
  const events = await store.readStream(streamOf(node), { fromRevision: (from?.revision ?? -1n) + 1n });
  let { revision, carried, serial } = from ?? { revision: -1n, carried: [], serial: 0 };
  let declared = false;
  for (const e of events) {
    revision = e.revision;
    if (e.type === 'DeclarationSent') {
      serial = e.data.serial;
      declared = true;
    } else if (e.type === 'ReportReceived') carried = e.data.carried;
  }
  return { view: { revision, carried, serial }, declared };
}

/**
 * What a send does after an append failed because its node's stream moved, once the view is caught
 * up: count it by what moved the stream. Another send among the events after the view took the
 * serial: a lost race, at most `maxAttempts` (the `maxAttempts`-th gives up). Only the node's own
 * reports and alives moved it, which changes nothing the revision guards about declarations:
 * tried again, up to `maxMoves` times, a bound a node's report rate alone should never reach.
 * Giving up throws CONVERGE_ERR_WRONG_EXPECTED_REVISION (409), with the failed append as its cause.
 */
export function createMoveBudget(maxAttempts: number, maxMoves: number): (what: string, declared: boolean, cause: unknown) => void {
  let races = 0;
  let moves = 0;
  return (what, declared, cause) => {
    if (declared ? ++races < maxAttempts : ++moves <= maxMoves) return;
    throw new ConvergeError(
      'CONVERGE_ERR_WRONG_EXPECTED_REVISION',
      declared
        ? `${what}: other sends took the serial ${races} times; gave up`
        : `${what}: the node's own events moved its stream ${moves} times in a row; gave up`,
      { cause },
    );
  };
}

/** The longest wait between two appends when catching up found nothing new (ms). */
const unseenPauseMaxMs = 100;

/**
 * What a send does before it tries again, given whether catching up read anything new: nothing new
 * means the stream moved by events this process cannot read yet (serve's group commit, store/sqlite/walSync.ts:
 * its reads stop before the oldest commit not yet synced, a few ms), and an append tried again at
 * once fails the same way. It was tried again within the same event-loop turn, so the sync could
 * not land, and the move budget ran out: 409 for a send that would have gone through ms later.
 * So wait, 1 ms doubling to 100 ms, until something new is read.
 */
export function createUnseenPause(): (seen: boolean) => Promise<void> {
  let waits = 0;
  return async (seen) => {
    if (seen) {
      waits = 0;
      return;
    }
    await sleep(Math.min(unseenPauseMaxMs, 2 ** waits++));
  };
}

/** A LoadNode that folds the node's whole stream from the store. */
export const foldNodeFromStore =
  (store: EventStore): LoadNode =>
  async (node) =>
    foldNodeEvents(node, await store.readStream(streamOf(node)));
