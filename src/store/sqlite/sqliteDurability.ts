import type { Notifier } from '../notifier.ts';
import { createNotifier } from '../notifier.ts';
import { sqliteError } from './sqliteErrors.ts';
import { createWalSyncer } from './walSync.ts';
import type { WalSyncer } from './walSync.ts';

// What a handle of the SQLite store shares with the other handles of its file in this process:
// one notifier for their live subscriptions, whichever handle appended, and under group commit
// (walSync.ts) the read limit. Each group-commit handle keeps its commits not yet synced, oldest
// first, each with the first position it wrote (null: it wrote no event, a checkpoint). Reads
// through any handle of the file stop before the oldest such position, so a subscriber (the relay
// above all: it must never publish a declaration that a power loss could take back), readAll,
// readStream and headPosition see only what is durable.

/** Per file: its notifier, its handles, and per group-commit handle its oldest unsynced position (null: none). */
const files = new Map<string, { notifier: Notifier; users: number; unsynced: Set<() => bigint | null> }>();

export type Durability = Readonly<{
  notifier: Notifier;
  /** Group commit's WAL syncer; null under `full` and `thread`. */
  syncer: WalSyncer | null;
  /** The newest position reads may return (null: no limit): one before the oldest unsynced one of any handle. */
  readLimit: () => bigint | null;
  /** `events` (position order) cut before the first one past the read limit. */
  durableOnly: <T extends { position: bigint }>(events: T[], limit?: bigint | null) => T[];
  /** A commit made (`first`: the first position it wrote): resolves once it is durable (at once without group commit). */
  synced: (first: bigint | null) => Promise<void>;
  /** Sync what is committed, then leave the file. */
  close: () => Promise<void>;
}>;

export type DurabilityOptions = Readonly<{
  /** The file's key: its resolved path, or a key of its own for `:memory:`. */
  key: string;
  /** Group commit: the WAL to sync; null for none. */
  walPath: string | null;
  walSync?: (fd: number) => Promise<void>;
}>;

export function joinFile(options: DurabilityOptions): Durability {
  const { key } = options;
  const shared = files.get(key) ?? { notifier: createNotifier(), users: 0, unsynced: new Set() };
  shared.users++;
  files.set(key, shared);
  const notifier = shared.notifier;

  const unsyncedCommits: { commit: number; first: bigint | null }[] = [];
  const oldestUnsynced = (): bigint | null => {
    for (const c of unsyncedCommits) if (c.first !== null) return c.first;
    return null;
  };
  const syncer: WalSyncer | null =
    options.walPath === null
      ? null
      : createWalSyncer({
          walPath: options.walPath,
          ...(options.walSync === undefined ? {} : { sync: options.walSync }),
          onDurable: (commits) => {
            let n = 0;
            while (n < unsyncedCommits.length && unsyncedCommits[n]!.commit <= commits) n++;
            const wroteEvents = unsyncedCommits.slice(0, n).some((c) => c.first !== null);
            unsyncedCommits.splice(0, n);
            if (wroteEvents) notifier.notify();
          },
        });
  if (syncer !== null) shared.unsynced.add(oldestUnsynced);

  const readLimit = (): bigint | null => {
    let limit: bigint | null = null;
    for (const f of shared.unsynced) {
      const first = f();
      if (first !== null && (limit === null || first - 1n < limit)) limit = first - 1n;
    }
    return limit;
  };
  const durableOnly = <T extends { position: bigint }>(events: T[], limit: bigint | null = readLimit()): T[] => {
    if (limit === null || events.length === 0 || events[events.length - 1]!.position <= limit) return events;
    let n = 0;
    while (n < events.length && events[n]!.position <= limit) n++;
    return events.slice(0, n);
  };
  const synced = async (first: bigint | null): Promise<void> => {
    if (syncer === null) return;
    const { commit, durable } = syncer.afterCommit();
    unsyncedCommits.push({ commit, first });
    try {
      await durable;
    } catch (err) {
      throw sqliteError(err, 'sync the sqlite store');
    }
  };
  const close = async (): Promise<void> => {
    // What is committed gets its sync (and its appends their answer) before the file closes.
    await syncer?.close();
    shared.unsynced.delete(oldestUnsynced);
    if (--shared.users === 0) files.delete(key);
  };
  return { notifier, syncer, readLimit, durableOnly, synced, close };
}
