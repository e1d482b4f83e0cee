import { checkCarriedPorts } from '../core/declaration/index.ts';
import type { SigningKey } from '../core/declaration/index.ts';
import { ConvergeError, isConvergeError, toConvergeError } from '../core/errors.ts';
import type { ErrorCode } from '../core/errors.ts';
import { declarationSentOf, nodeOfStream, streamOf } from '../core/events/index.ts';
import type { DeclarationSent, WithId } from '../core/events/index.ts';
import type { AppendResult, EventStore, StreamWrite } from '../store/port.ts';
import { unlessAborted } from '../retry.ts';
import { createTurnBudget } from '../turnBudget.ts';
import { attr, digestKey, tracer } from '../tracing/index.ts';
import { createHoldsReader, pinnedError } from './holds.ts';
import type { HoldsReader } from './holds.ts';
import { catchUpSendView, createMoveBudget, createUnseenPause, sendViewLoader } from './sendView.ts';
import type { LoadNode, SendView } from './sendView.ts';
import { validateItems } from './sendItems.ts';
import type { Todo } from './sendItems.ts';
import { createDeclarationSigner } from './sendSigning.ts';
import type { ToSign } from './sendSigning.ts';
import type { SignPool } from './signPool.ts';

// Send = record. Every declaration, one node's (send.ts, a batch of one) or a fleet's, is recorded
// here: validated, signed and appended as a DeclarationSent *before* anything is published — the
// store is the outbox (docs/design.md#2-events-the-system-of-record) and the relay publishes from
// it. Many nodes' declarations go in one append call — one transaction on SQLite and PostgreSQL —
// each write naming the revision its serial was derived from (sendView.ts). A rollout's
// RolloutSent goes into the same call (`extra`), so the rollout's record of what it sent and the
// declarations themselves are stored together or not at all.
//
// Views come from an injected LoadNode (the read model in `serve`), which may lag the store. A
// node stream that moved meanwhile (a report, an alive, another send) fails the whole call with
// CONVERGE_ERR_WRONG_EXPECTED_REVISION; then every node of the batch is brought up to date from
// the store by reading only the events after its view (usually none) and the call is made again,
// counted by sendView.ts `createMoveBudget`: a send among the events read is a lost race (5 at
// most); reports and alives alone only moved the streams (100 at most), so a fleet reporting fast
// does not make a wave's send fail.

/** `wave`: the wave this item's tag names, when it is not the batch's (a rollback's sends span waves). */
export type BatchItem = Readonly<{ node: string; resources: unknown; wave?: number; force?: boolean | undefined }>;

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
  /**
   * The time written into every declaration of the batch (default: the sender's clock); but a
   * batch begun by the call before's `ahead` keeps the time it was signed at (`extra` is told).
   */
  now?: Date;
  /**
   * The items of the call that will follow this one: with a signing thread, signed there while
   * this call appends (sendSigning.ts). Only a hint: the next call checks each node's serial and
   * resources again, and signs afresh any that moved.
   */
  ahead?: readonly BatchItem[];
  /**
   * Tag every declaration as this rollout's wave (their ids then name the rollout, not the
   * serial), or as its rollback (`rollback: true`; ids name the rollback).
   */
  rollout?: Readonly<{ id: string; wave: number; rollback?: true }>;
  /**
   * Send to pinned nodes too. Without it a direct send (no `rollout`) refuses a pinned node with
   * CONVERGE_ERR_NODE_PINNED (docs/design.md §8 "Holds and pins"); a rollout skips them itself.
   */
  force?: boolean;
  /**
   * More writes for the same append call, built from what is about to be sent (the rollout's
   * RolloutSent). A conflict on one of these streams is not retried here: it is thrown, for the
   * caller to read again and decide again.
   */
  extra?: (
    sent: readonly Readonly<{ node: string; serial: number; digest: string }>[],
    refused: readonly BatchOutcome[],
    at: Date,
  ) => readonly StreamWrite[];
  /**
   * Give the call up once this aborts (the rollout driver's stop): it rejects with the signal's
   * reason before its next append, and an append already made is waited for. Nothing is stored
   * but by an append, so a call given up so leaves its nodes to be sent by the next one.
   */
  signal?: AbortSignal;
}>;

export type BatchSenderOptions = Readonly<{
  store: EventStore;
  key: SigningKey;
  now?: () => Date;
  /** How to learn a node's view; default reads its stream. Inject a read model to skip the read. */
  loadNode?: LoadNode;
  /** The holds and pins a direct send consults (default: read from `store`). */
  holds?: HoldsReader;
  /** Races lost to another send (it took a node's serial first) before giving up. */
  maxAttempts?: number;
  /** Append calls made again because only the nodes' own reports and alives moved their streams. */
  maxMoves?: number;
  /** Time spent building and signing before the event loop gets a turn (ms; src/turnBudget.ts). */
  signSliceMs?: number;
  /** The thread that signs off the engine's (signPool.ts); without it, or once it failed, this thread signs. */
  signPool?: SignPool;
}>;

/**
 * Signing's slice of a turn (ms). Longer than the loop's default slice: at 2 ms the sender got half
 * the turns it had at 100 signatures a turn while reports of the earlier waves were folded, and a
 * 100,000-node rollout's sending took twice as long (bench/rollout, BENCHMARKS.md "Rollouts").
 */
export const defaultSignSliceMs = 5;

export type BatchSender = Readonly<{
  /** Send each item's resources to its node, all in one append call. */
  sendMany: (items: readonly BatchItem[], options?: SendManyOptions) => Promise<BatchResult>;
}>;

/** An item's outcome as recorded: a refusal keeps its error whole (details, cause) for a sender of one to throw. */
export type RecordedOutcome =
  Readonly<{ node: string; ok: true; digest: string; serial: number }> | Readonly<{ node: string; ok: false; error: ConvergeError }>;

export type RecordResult = Readonly<{ outcomes: readonly RecordedOutcome[]; position: bigint | null; appends: number }>;

/** Validate, sign and append each item's declaration, all in one append call (made again while streams moved). */
export type RecordDeclarations = (items: readonly BatchItem[], options?: SendManyOptions) => Promise<RecordResult>;

/** A node's declaration whose id (node and serial) was stored already, by another send. */
const takenBy = (e: WithId<DeclarationSent>): ConvergeError =>
  new ConvergeError('CONVERGE_ERR_WRONG_EXPECTED_REVISION', `serial ${e.data.serial} of ${e.data.node} was taken by another send`);

const failure = (node: string, err: unknown): RecordedOutcome => ({ node, ok: false, error: toConvergeError(err) });

const publicOutcome = (o: RecordedOutcome): BatchOutcome =>
  o.ok ? o : { node: o.node, ok: false, code: o.error.code, message: o.error.message };

/** What a retry is counted as, for the error that gives up: one node's send, or one of a call's. */
const sendLabel = (node: string, n: number): string => (n === 1 ? `send to ${node}` : `send to ${node} (one of ${n} in one call)`);

/** Bring the views of `nodes` up to the store's head; whether one moved, and whether a send was among what moved it. */
async function catchUpViews(
  store: EventStore,
  views: Map<string, SendView>,
  nodes: readonly Todo[],
  signal: AbortSignal | undefined,
): Promise<{ seen: boolean; declared: boolean }> {
  let seen = false;
  let declared = false;
  for (const t of nodes) {
    signal?.throwIfAborted();
    const before = views.get(t.node)!;
    const caughtUp = await catchUpSendView(store, t.node, before);
    views.set(t.node, caughtUp.view);
    declared ||= caughtUp.declared;
    seen ||= caughtUp.view.revision !== before.revision;
  }
  return { seen, declared };
}

/**
 * The append, as a span of the request's trace when one is traced (docs/operations.md "Tracing"),
 * with a span per declaration remembered by digest before the append: the relay may publish it
 * as soon as it is stored, and its publish span is found by that digest.
 */
async function appendTracedIn(
  store: EventStore,
  writes: StreamWrite[],
  sent: readonly Readonly<{ node: string; serial: number; digest: string }>[],
): Promise<AppendResult> {
  const t = tracer();
  if (!t.enabled) return store.append(writes);
  const span = t.start('converge.store.append', { childOnly: true, attributes: { [attr.batch]: writes.length } });
  for (const d of sent) {
    const one = t.start('converge.declaration', {
      parent: span,
      childOnly: true,
      attributes: { [attr.node]: d.node, [attr.digest]: d.digest, [attr.serial]: d.serial },
    });
    one.remember(digestKey(d.digest));
    one.end();
  }
  try {
    const r = await store.append(writes);
    if (r.position !== null) span.setAttribute(attr.position, String(r.position));
    span.end();
    return r;
  } catch (err) {
    span.end(err);
    throw err;
  }
}

export function createDeclarationRecorder(options: BatchSenderOptions): RecordDeclarations {
  const { store, key } = options;
  const now = options.now ?? (() => new Date());
  const maxAttempts = options.maxAttempts ?? 5;
  const maxMoves = options.maxMoves ?? 100;
  const loadView = sendViewLoader(store, options.loadNode);
  const holds = options.holds ?? createHoldsReader(store);
  const signSliceMs = options.signSliceMs ?? defaultSignSliceMs;
  const signer = createDeclarationSigner({
    key,
    sliceMs: signSliceMs,
    ...(options.signPool === undefined ? {} : { pool: options.signPool }),
  });

  /** Begin signing the items of the caller's next call (`ahead`); any that is wrong is left to that call to answer. */
  async function signAhead(items: readonly BatchItem[]): Promise<void> {
    const todo = validateItems(items, () => undefined);
    const next: ToSign[] = [];
    for (const t of todo) {
      const v = await loadView(t.node);
      next.push({ node: t.node, serial: v.serial + 1, resources: t.spec.resources, specText: t.specText });
    }
    signer.ahead(now(), next);
  }

  return async function record(items, opts = {}) {
    const outcomes: (RecordedOutcome | null)[] = items.map(() => null);
    let todo = validateItems(items, (i, node, err) => (outcomes[i] = failure(node, err)));
    if (opts.rollout === undefined && opts.force !== true && todo.length > 0) {
      const h = await holds.refresh();
      if (h.nodes.size > 0)
        todo = todo.filter((t) => {
          const pinned = items[t.i]?.force === true ? null : (h.nodes.get(t.node)?.pinned ?? null);
          if (pinned !== null) outcomes[t.i] = failure(t.node, pinnedError(t.node, pinned));
          return pinned === null;
        });
    }
    const signal = opts.signal;
    const views = new Map<string, SendView>();
    for (const t of todo) {
      signal?.throwIfAborted();
      views.set(t.node, await loadView(t.node));
    }
    let appends = 0;
    /** Position of the last event written by any call so far (null: none written). */
    let position: bigint | null = null;
    const at = signer.aheadAt(todo[0]?.node) ?? opts.now ?? now();
    const moved = createMoveBudget(maxAttempts, maxMoves);
    const pause = createUnseenPause();
    /** The nodes still to be recorded: the whole batch, then only those that lost a serial in a call that wrote the rest. */
    let pending = todo;
    const done = (): RecordResult => ({ outcomes: outcomes as RecordedOutcome[], position, appends });

    /**
     * The call's writes for `pending`: a node whose newest report carries a port the spec asks for
     * is refused here. Signing is most of a send's CPU (an Ed25519 signature each): it is done on
     * the signing thread when the sender has one, else here in slices of a few ms
     * (sendSigning.ts), giving the loop back between, so a wave's 500-node batches do not hold
     * the API, ingest and the projections for a whole batch. The append is still one call.
     */
    const build = async () => {
      const writes: StreamWrite[] = [];
      const sent: { node: string; serial: number; digest: string }[] = [];
      const refused: BatchOutcome[] = [];
      const made = new Map<number, WithId<DeclarationSent>>();
      const toSign: (ToSign & { t: Todo; v: SendView })[] = [];
      for (const t of pending) {
        const v = views.get(t.node)!;
        try {
          checkCarriedPorts(t.spec, v.carried);
        } catch (err) {
          const f = failure(t.node, err);
          outcomes[t.i] = f;
          refused.push(publicOutcome(f));
          continue;
        }
        outcomes[t.i] = null;
        toSign.push({ node: t.node, serial: v.serial + 1, resources: t.spec.resources, specText: t.specText, t, v });
      }
      // A signing thread that does not answer must not hold a stop: the signatures are then unused.
      const signed = await unlessAborted(signer.sign(at, toSign), signal);
      // Recording them (ids, events, writes) is work of this thread too: in slices, whoever signed.
      const budget = createTurnBudget({ sliceMs: signSliceMs });
      for (const [k, { t, v, serial }] of toSign.entries()) {
        if (budget.spent()) await budget.nextSlice();
        const event = declarationSentOf(
          {
            node: t.node,
            serial,
            resources: t.spec.resources,
            keyId: key.keyId,
            now: at,
            specDigest: t.specDigest,
            ...(opts.rollout === undefined ? {} : { rollout: { ...opts.rollout, wave: items[t.i]?.wave ?? opts.rollout.wave } }),
          },
          signed[k]!,
        );
        made.set(t.i, event);
        sent.push({ node: t.node, serial: event.data.serial, digest: event.data.digest });
        writes.push({ stream: streamOf(t.node), expected: v.revision < 0n ? 'no_stream' : v.revision, events: [event] });
      }
      return { writes, sent, refused, made };
    };

    /**
     * The answers of a call that went through. Written 0 for a node write: its event id was stored
     * already. For a rollout's send that is this rollout's earlier send to the node (the id names
     * rollout and node), recorded by a call whose answer was lost; the outcome then is what is
     * stored, not what was built. Any other send's id names the node and the serial: another send
     * took that serial first (this call never retries an append whose outcome it does not know),
     * a lost race, and the node is tried again at the next serial. Returns the nodes lost so.
     */
    const answer = async (r: AppendResult, made: ReadonlyMap<number, WithId<DeclarationSent>>): Promise<Todo[]> => {
      const lost: Todo[] = [];
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
          outcomes[t.i] =
            stored !== undefined && stored.type === 'DeclarationSent'
              ? { node: t.node, ok: true, digest: stored.data.digest, serial: stored.data.serial }
              : failure(t.node, takenBy(e));
          continue;
        }
        outcomes[t.i] = { node: t.node, ok: true, digest: e.data.digest, serial: e.data.serial };
      }
      return lost;
    };

    for (let first = true; ; first = false) {
      const building = build();
      // Once this call's own signing is asked for: the thread answers in order.
      if (first && opts.ahead !== undefined && opts.ahead.length > 0) void signAhead(opts.ahead).catch(() => undefined);
      const { writes, sent, refused, made } = await building;
      // The extra writes go with the first call that writes; a later call only retries lost nodes.
      const extra = pending === todo ? (opts.extra?.(sent, refused, at) ?? []) : [];
      if (writes.length === 0 && extra.length === 0) return done();
      signal?.throwIfAborted();
      let r: AppendResult;
      try {
        appends++;
        r = await appendTracedIn(store, [...writes, ...extra], sent);
      } catch (err) {
        if (!isConvergeError(err, 'CONVERGE_ERR_WRONG_EXPECTED_REVISION')) throw err;
        const stream = typeof err.details?.['stream'] === 'string' ? err.details['stream'] : null;
        const node = stream === null ? null : nodeOfStream(stream);
        if (node === null || !views.has(node)) throw err;
        // Bring every node of the call up to date, not only the one named: the error names the
        // first stream that moved, and under load several may have.
        const { seen, declared } = await catchUpViews(store, views, pending, signal);
        try {
          moved(sendLabel(node, pending.length), declared, err);
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
      const lost = await answer(r, made);
      if (lost.length === 0) return done();
      const { seen } = await catchUpViews(store, views, lost, signal);
      try {
        moved(sendLabel(lost[0]!.node, lost.length), true, takenBy(made.get(lost[0]!.i)!));
      } catch (gaveUp) {
        // The rest of the batch is recorded: the call answers, each node lost once more refused.
        for (const t of lost) outcomes[t.i] = failure(t.node, gaveUp);
        return done();
      }
      await pause(seen);
      pending = lost;
    }
  };
}

export function createBatchSender(options: BatchSenderOptions): BatchSender {
  const record = createDeclarationRecorder(options);
  return {
    sendMany: async (items, opts) => {
      const r = await record(items, opts);
      return { outcomes: r.outcomes.map(publicOutcome), position: r.position, appends: r.appends };
    },
  };
}
