import type { Resource, SigningKey } from '../core/declaration/index.ts';
import { signDeclarationOf } from '../core/events/index.ts';
import type { SignedDeclaration } from '../core/events/index.ts';
import { createTurnBudget } from '../turnBudget.ts';
import type { SignPool } from './signPool.ts';

// Where the bulk sender's declarations are signed (sendBatch.ts): on the signing thread when the
// sender has one (signPool.ts) and it has loaded, else on this thread in slices of a turn
// (src/turnBudget.ts): while the thread starts (a rollout's first, small waves are not kept
// waiting for it) and once it failed. Signed bytes depend on the node, its serial, the time and the resources
// only, so either thread gives the same declaration for the same four.
//
// `ahead` begins signing the batch a caller will send next while this one is appended: a
// rollout's next 500 nodes are signed on the thread while the engine's thread records the
// current 500. The next call takes what was signed ahead for each of its nodes whose serial and
// resources are still the ones signed, at the time it was signed at (`aheadAt`), and signs the
// rest then. What the next call does not take is dropped: nothing is stored before its call.

export type ToSign = Readonly<{
  node: string;
  serial: number;
  resources: readonly Resource[];
  /** The resources as they go into the bytes (JSON of the validated spec): what an earlier signing must match. */
  specText: string;
}>;

export type DeclarationSigner = Readonly<{
  /** The time a batch signed ahead for `node` was signed at, or null: a call sending to it signs at that time. */
  aheadAt: (node: string | undefined) => Date | null;
  /** The declarations of `items` at `at`, in their order: taken from what was signed ahead where it matches. */
  sign: (at: Date, items: readonly ToSign[]) => Promise<SignedDeclaration[]>;
  /** Begin signing `items` at `at` for the next `sign` (only with a signing thread; a later `ahead` replaces it). */
  ahead: (at: Date, items: readonly ToSign[]) => void;
}>;

type Ahead = Readonly<{
  at: Date;
  items: ReadonlyMap<string, Readonly<{ index: number; serial: number; specText: string }>>;
  /** Null if the thread failed: those are signed again. */
  signed: Promise<SignedDeclaration[] | null>;
}>;

export function createDeclarationSigner(options: Readonly<{ key: SigningKey; pool?: SignPool; sliceMs: number }>): DeclarationSigner {
  const { key, pool } = options;
  let slot: Ahead | null = null;

  /** On this thread, giving the loop a turn once a slice is spent. */
  async function here(at: Date, items: readonly ToSign[]): Promise<SignedDeclaration[]> {
    const budget = createTurnBudget({ sliceMs: options.sliceMs });
    const out: SignedDeclaration[] = [];
    for (const t of items) {
      if (budget.spent()) await budget.nextSlice();
      out.push(signDeclarationOf({ node: t.node, serial: t.serial, resources: t.resources, key, now: at }));
    }
    return out;
  }

  /** Whether the thread signs now; one still loading is started and not waited for (here, the first batches). */
  function threadReady(): boolean {
    if (pool === undefined || !pool.usable()) return false;
    if (pool.ready()) return true;
    pool.start();
    return false;
  }

  /** On the thread while it works; a request it failed is signed here (nothing was stored from it). */
  function fresh(at: Date, items: readonly ToSign[]): Promise<SignedDeclaration[]> {
    if (items.length === 0) return Promise.resolve([]);
    if (pool === undefined || !threadReady()) return here(at, items);
    return pool.sign(at, items).catch(() => here(at, items));
  }

  return {
    aheadAt: (node) => (node !== undefined && slot?.items.has(node) === true ? slot.at : null),
    async sign(at, items) {
      // Taken by the call it was signed for (its time): a retry of the call before leaves it be.
      const a = slot !== null && slot.at.getTime() === at.getTime() ? slot : null;
      if (a !== null) slot = null;
      const taken: (number | null)[] = items.map((t) => {
        const x = a?.items.get(t.node);
        return x !== undefined && x.serial === t.serial && x.specText === t.specText ? x.index : null;
      });
      const rest = items.filter((_, i) => taken[i] === null);
      // Posted before waiting for the batch signed ahead: the thread answers in order.
      const signing = fresh(at, rest);
      const early = a === null || rest.length === items.length ? null : await a.signed;
      const late = await signing;
      // Taken from a batch the thread then failed: signed now, on this thread.
      const again =
        early === null
          ? await fresh(
              at,
              items.filter((_, i) => taken[i] !== null),
            )
          : [];
      let r = 0;
      let g = 0;
      const out: SignedDeclaration[] = [];
      for (const index of taken) out.push(index === null ? late[r++]! : early === null ? again[g++]! : early[index]!);
      return out;
    },
    ahead(at, items) {
      if (pool === undefined || items.length === 0 || !threadReady()) return;
      const byNode = new Map(items.map((t, index) => [t.node, { index, serial: t.serial, specText: t.specText }]));
      slot = { at, items: byNode, signed: pool.sign(at, items).catch(() => null) };
    },
  };
}
