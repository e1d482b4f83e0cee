import { checkCarriedPorts, specDigestOf, validateSpec } from '../core/declaration/index.ts';
import type { SigningKey, Spec } from '../core/declaration/index.ts';
import { ConvergeError, isConvergeError, toConvergeError } from '../core/errors.ts';
import type { ErrorCode } from '../core/errors.ts';
import { makeDeclarationSent, nodeOfStream, streamOf } from '../core/events/index.ts';
import type { DeclarationSent, WithId } from '../core/events/index.ts';
import type { AppendResult, EventStore, StreamWrite } from '../store/port.ts';
import { validateNodeId } from '../core/wire/nodeId.ts';
import { catchUpSendView, createMoveBudget, createUnseenPause, sendViewLoader } from './send.ts';
import type { LoadNode, SendView } from './send.ts';

// Issue 14 §6: sending at fleet speed. The one-at-a-time path (send.ts) pays a store transaction
// per node; this one records many nodes' declarations in one append call — one transaction on
// SQLite and PostgreSQL — each write still naming the revision its serial was derived from. A
// rollout's RolloutSent goes into the same call (`extra`), so the rollout's record of what it
// sent and the declarations themselves are stored together or not at all.
//
// Views come from an injected LoadNode (the read model in `serve`), which may lag the store. A
// node stream that moved meanwhile (a report, an alive, another send) fails the whole call with
// CONVERGE_ERR_WRONG_EXPECTED_REVISION; then every node of the batch is brought up to date from
// the store by reading only the events after its view (usually none) and the call is made again.
// Each retry is counted as the one-at-a-time sender counts it (send.ts `createMoveBudget`): a send
// among the events read is a lost race (5 at most); reports and alives alone only moved the
// streams (100 at most), so a fleet reporting fast does not make a wave's send fail.

export type BatchItem = Readonly<{ node: string; resources: unknown }>;

export type BatchOutcome =
  | Readonly<{ node: string; ok: true; digest: string; serial: number }>
  | Readonly<{ node: string; ok: false; code: ErrorCode; message: string }>;

export type BatchResult = Readonly<{
  /** One per item, in the items' order. */
  outcomes: readonly BatchOutcome[];
  /** Global position of the last event written (null if nothing was). */
  position: bigint | null;
  /** Append calls made, retries included. */
  appends: number;
}>;

export type SendManyOptions = Readonly<{
  /** The time written into every declaration of the batch (default: the sender's clock). */
  now?: Date;
  /** Tag every declaration as this rollout's wave (their ids then name the rollout, not the serial). */
  rollout?: Readonly<{ id: string; wave: number }>;
  /**
   * More writes for the same append call, built from what is about to be sent (the rollout's
   * RolloutSent). A conflict on one of these streams is not retried here: it is thrown, for the
   * caller to read again and decide again.
   */
  extra?: (
    sent: readonly Readonly<{ node: string; serial: number; digest: string }>[],
    refused: readonly BatchOutcome[],
  ) => readonly StreamWrite[];
}>;

export type BatchSenderOptions = Readonly<{
  store: EventStore;
  key: SigningKey;
  now?: () => Date;
  loadNode?: LoadNode;
  /** Races lost to another send (it took a node's serial first) before giving up. */
  maxAttempts?: number;
  /** Append calls made again because only the nodes' own reports and alives moved their streams. */
  maxMoves?: number;
}>;

export type BatchSender = Readonly<{
  /** Send each item's resources to its node, all in one append call. */
  sendMany: (items: readonly BatchItem[], options?: SendManyOptions) => Promise<BatchResult>;
}>;

/** A node's declaration whose id (node and serial) was stored already, by another send. */
const takenBy = (e: WithId<DeclarationSent>): ConvergeError =>
  new ConvergeError('CONVERGE_ERR_WRONG_EXPECTED_REVISION', `serial ${e.data.serial} of ${e.data.node} was taken by another send`);

const failure = (node: string, err: unknown): BatchOutcome => {
  const e = toConvergeError(err);
  return { node, ok: false, code: e.code, message: e.message };
};

export function createBatchSender(options: BatchSenderOptions): BatchSender {
  const { store, key } = options;
  const now = options.now ?? (() => new Date());
  const maxAttempts = options.maxAttempts ?? 5;
  const maxMoves = options.maxMoves ?? 100;

  const loadView = sendViewLoader(store, options.loadNode);

  async function sendMany(items: readonly BatchItem[], opts: SendManyOptions = {}): Promise<BatchResult> {
    const outcomes: (BatchOutcome | null)[] = items.map(() => null);
    // Validate first: a node id or a spec that is wrong is that item's answer, not the batch's.
    const specs = new Map<unknown, Spec>();
    const todo: { i: number; node: string; spec: Spec; specDigest: string }[] = [];
    const named = new Set<string>();
    for (const [i, item] of items.entries()) {
      try {
        validateNodeId(item.node);
        if (named.has(item.node))
          throw new ConvergeError('CONVERGE_ERR_BAD_REQUEST', `node ${item.node} is named more than once in one batch`);
        named.add(item.node);
        // Items sharing one resources value (a rollout: every node the same spec) are validated and digested once.
        let spec = specs.get(item.resources);
        if (spec === undefined) specs.set(item.resources, (spec = validateSpec({ resources: item.resources })));
        todo.push({ i, node: item.node, spec, specDigest: '' });
      } catch (err) {
        outcomes[i] = failure(item.node, err);
      }
    }
    const digests = new Map<Spec, string>();
    for (const t of todo) {
      let d = digests.get(t.spec);
      if (d === undefined) digests.set(t.spec, (d = specDigestOf(t.spec.resources)));
      t.specDigest = d;
    }

    const views = new Map<string, SendView>();
    for (const t of todo) views.set(t.node, await loadView(t.node));
    let appends = 0;
    /** Position of the last event written by any call so far (null: none written). */
    let position: bigint | null = null;
    const at = opts.now ?? now();
    const moved = createMoveBudget(maxAttempts, maxMoves);
    const pause = createUnseenPause();
    /** The nodes still to be recorded: the whole batch, then only those that lost a serial in a call that wrote the rest. */
    let pending = todo;
    const done = (): BatchResult => ({ outcomes: outcomes as BatchOutcome[], position, appends });
    for (;;) {
      const writes: StreamWrite[] = [];
      const sent: { node: string; serial: number; digest: string }[] = [];
      const refused: BatchOutcome[] = [];
      const made = new Map<number, WithId<DeclarationSent>>();
      for (const t of pending) {
        const v = views.get(t.node)!;
        try {
          checkCarriedPorts(t.spec, v.carried);
        } catch (err) {
          const f = failure(t.node, err);
          outcomes[t.i] = f;
          refused.push(f);
          continue;
        }
        outcomes[t.i] = null;
        const event = makeDeclarationSent({
          node: t.node,
          serial: v.serial + 1,
          resources: t.spec.resources,
          key,
          now: at,
          specDigest: t.specDigest,
          ...(opts.rollout === undefined ? {} : { rollout: opts.rollout }),
        });
        made.set(t.i, event);
        sent.push({ node: t.node, serial: event.data.serial, digest: event.data.digest });
        writes.push({ stream: streamOf(t.node), expected: v.revision < 0n ? 'no_stream' : v.revision, events: [event] });
      }
      // The extra writes go with the first call that writes; a later call only retries lost nodes.
      const extra = pending === todo ? (opts.extra?.(sent, refused) ?? []) : [];
      if (writes.length === 0 && extra.length === 0) return done();
      let r: AppendResult;
      try {
        appends++;
        r = await store.append([...writes, ...extra]);
      } catch (err) {
        if (!isConvergeError(err, 'CONVERGE_ERR_WRONG_EXPECTED_REVISION')) throw err;
        const stream = typeof err.details?.['stream'] === 'string' ? err.details['stream'] : null;
        const node = stream === null ? null : nodeOfStream(stream);
        if (node === null || !views.has(node)) throw err;
        // Bring every node of the call up to date, not only the one named: the error names the
        // first stream that moved, and under load several may have.
        let declared = false;
        let seen = false;
        for (const t of pending) {
          const before = views.get(t.node)!;
          const caughtUp = await catchUpSendView(store, t.node, before);
          views.set(t.node, caughtUp.view);
          declared ||= caughtUp.declared;
          seen ||= caughtUp.view.revision !== before.revision;
        }
        try {
          moved(`send to ${node} (one of ${pending.length} in one call)`, declared, err);
        } catch (gaveUp) {
          // Before any call went through, the whole call fails, as a single send does. After one
          // that recorded the rest of the batch, those answers stand and the nodes left are refused.
          if (pending === todo) throw gaveUp;
          for (const t of pending) outcomes[t.i] = failure(t.node, gaveUp);
          return done();
        }
        await pause(seen);
        continue;
      }
      if (r.position !== null) position = r.position;
      // Written 0 for a node write: its event id was stored already. For a rollout's send that
      // is this rollout's earlier send to the node (the id names rollout and node), recorded by
      // a call whose answer was lost; the outcome then is what is stored, not what was built.
      // Any other send's id names the node and the serial: another send took that serial first
      // (this call never retries an append whose outcome it does not know), a lost race as in
      // send.ts, and the node is tried again at the next serial.
      const lost: typeof todo = [];
      let idx = 0;
      for (const t of pending) {
        const e = made.get(t.i);
        if (e === undefined) continue;
        const s = r.streams[idx++];
        if (s !== undefined && s.written === 0) {
          if (opts.rollout === undefined) {
            outcomes[t.i] = failure(t.node, takenBy(e));
            lost.push(t);
            continue;
          }
          const stored = (await store.readStream(streamOf(t.node))).find((x) => x.id === e.id);
          if (stored !== undefined && stored.type === 'DeclarationSent') {
            outcomes[t.i] = { node: t.node, ok: true, digest: stored.data.digest, serial: stored.data.serial };
            continue;
          }
          outcomes[t.i] = failure(t.node, takenBy(e));
          continue;
        }
        outcomes[t.i] = { node: t.node, ok: true, digest: e.data.digest, serial: e.data.serial };
      }
      if (lost.length === 0) return done();
      let seen = false;
      for (const t of lost) {
        const before = views.get(t.node)!;
        const view = (await catchUpSendView(store, t.node, before)).view;
        views.set(t.node, view);
        seen ||= view.revision !== before.revision;
      }
      try {
        moved(`send to ${lost[0]!.node} (one of ${lost.length} in one call)`, true, takenBy(made.get(lost[0]!.i)!));
      } catch (gaveUp) {
        // The rest of the batch is recorded: the call answers, each node lost once more refused.
        for (const t of lost) outcomes[t.i] = failure(t.node, gaveUp);
        return done();
      }
      await pause(seen);
      pending = lost;
    }
  }

  return { sendMany };
}
