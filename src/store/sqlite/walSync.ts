import { close, fdatasync, fstat, fsync, open, stat } from 'node:fs';
import { dirname } from 'node:path';
import { promisify } from 'node:util';
import { ConvergeError } from '../../core/errors.ts';

// Group commit for the SQLite store (docs/store.md, Durability). With
// synchronous=FULL SQLite fdatasyncs the WAL inside every COMMIT, on the event loop: 4–7 ms a
// commit in `serve`, and 86–136 ms under a flood. With synchronous=NORMAL a commit only
// write()s its frames to the WAL; this module then fdatasyncs that same WAL file on a libuv
// thread, and a commit counts as durable once a sync that *started after it* has succeeded.
// That is what FULL does, moved off the loop: fdatasync flushes every dirty page of the inode,
// whichever descriptor wrote it, and WAL recovery keeps exactly the prefix of commits whose
// frames are all on disk (frames carry a cumulative checksum), so a synced commit and all before
// it survive power loss. Commits made while a sync runs share the next one.
//
// What SQLite still syncs itself under NORMAL: the WAL header when it restarts the WAL after a
// checkpoint (so stale frames of the old generation are never taken for new ones), the WAL before
// a checkpoint copies it into the database, and the database after. The WAL file keeps one inode
// while any connection has the database open (SQLite deletes it only on the last close, which
// needs an exclusive lock our open connection's shared lock denies; journal_size_limit and
// wal_checkpoint(TRUNCATE) truncate it in place), so the descriptor opened here stays the one
// SQLite writes. If the path ever names another file (someone deleted or replaced the WAL under an
// open store), SQLite is writing to a file no sync here can reach: that is refused as a failed sync.
//
// A failed sync fails every commit it covered and every later one: after a failed fdatasync Linux
// may mark the pages clean without writing them, so a later sync that succeeds proves nothing of
// them (PostgreSQL's "fsyncgate", 2018). The store is broken until the process reopens it.

const openAsync = promisify(open);
const closeAsync = promisify(close);
const fstatAsync = promisify(fstat);
const statAsync = promisify(stat);
const fsyncAsync = promisify(fsync);
/** The sync of the WAL: fdatasync, as SQLite's own (it flushes the data and the size needed to read it). */
export const defaultWalSync: (fd: number) => Promise<void> = promisify(fdatasync);

export type WalSyncer = Readonly<{
  /**
   * Call right after a commit returned: `commit` numbers it (1, 2, …, as onDurable counts), and
   * `durable` resolves once a sync started after it has succeeded, rejects
   * (CONVERGE_ERR_STORE_UNAVAILABLE) if that sync or an earlier one failed.
   */
  afterCommit: () => Readonly<{ commit: number; durable: Promise<void> }>;
  /** Resolves once every commit made so far is durable (at once if none waits), rejects if broken. */
  flush: () => Promise<void>;
  /** The failure that broke the syncer, or null. */
  broken: () => ConvergeError | null;
  /** Wait for the sync in flight (its outcome goes to its commits), then close the descriptors. */
  close: () => Promise<void>;
}>;

export type WalSyncerOptions = Readonly<{
  walPath: string;
  /** Injectable for tests, which hold it pending or make it fail; default fdatasync. */
  sync?: (fd: number) => Promise<void>;
  /** Called with the number of commits durable so far, each time it grows, before their promises settle. */
  onDurable: (commits: number) => void;
}>;

type Waiter = Readonly<{ commit: number; resolve: () => void; reject: (err: Error) => void }>;

export function createWalSyncer(options: WalSyncerOptions): WalSyncer {
  const { walPath, onDurable } = options;
  const sync = options.sync ?? defaultWalSync;
  let committed = 0;
  let durable = 0;
  let waiters: Waiter[] = [];
  let inFlight: Promise<void> | null = null;
  let failure: ConvergeError | null = null;
  let fd: number | null = null;
  let inode: { dev: number; ino: number } | null = null;

  const failed = (err: unknown): ConvergeError =>
    err instanceof ConvergeError
      ? err
      : new ConvergeError(
          'CONVERGE_ERR_STORE_UNAVAILABLE',
          `sync of ${walPath} failed (${err instanceof Error ? err.message : String(err)}); what it covered is not acknowledged, and this store acknowledges nothing more until the process reopens it`,
          { cause: err },
        );

  /** The WAL's descriptor, opened on the first sync; its directory synced once, as SQLite does for a WAL it creates. */
  async function walFd(): Promise<number> {
    if (fd === null) {
      fd = await openAsync(walPath, 'r');
      const s = await fstatAsync(fd);
      inode = { dev: s.dev, ino: s.ino };
      const dir = await openAsync(dirname(walPath), 'r');
      try {
        await fsyncAsync(dir);
      } finally {
        await closeAsync(dir);
      }
      return fd;
    }
    const s = await statAsync(walPath).catch(() => null);
    if (s === null || s.dev !== inode!.dev || s.ino !== inode!.ino) {
      throw new ConvergeError(
        'CONVERGE_ERR_STORE_UNAVAILABLE',
        `${walPath} was ${s === null ? 'removed' : 'replaced'} while the store had it open; what SQLite wrote since cannot be synced, so nothing more is acknowledged`,
      );
    }
    return fd;
  }

  function settle(): void {
    if (failure !== null) {
      const ws = waiters;
      waiters = [];
      for (const w of ws) w.reject(failure);
      return;
    }
    let i = 0;
    while (i < waiters.length && waiters[i]!.commit <= durable) waiters[i++]!.resolve();
    if (i > 0) waiters = waiters.slice(i);
  }

  function kick(): void {
    if (inFlight !== null || failure !== null || durable === committed) return;
    // Everything committed before this line is in the WAL file (the commits returned): the sync covers it.
    const upTo = committed;
    inFlight = (async () => {
      try {
        await sync(await walFd());
        durable = upTo;
        onDurable(durable);
      } catch (err) {
        failure = failed(err);
      }
    })().finally(() => {
      inFlight = null;
      settle();
      kick();
    });
  }

  const wait = (commit: number): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      waiters.push({ commit, resolve, reject });
      kick();
    });

  return {
    afterCommit: () => {
      const commit = ++committed;
      return { commit, durable: failure !== null ? Promise.reject(failure) : wait(commit) };
    },
    flush: () => {
      if (failure !== null) return Promise.reject(failure);
      return durable === committed ? Promise.resolve() : wait(committed);
    },
    broken: () => failure,
    close: async () => {
      while (inFlight !== null) await inFlight;
      if (fd !== null) await closeAsync(fd).catch(() => undefined);
      fd = null;
    },
  };
}
