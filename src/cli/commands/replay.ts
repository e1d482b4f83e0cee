import { resolve } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { NodeState } from '../../../projections/index.ts';
import type { Config } from '../../app/config.ts';
import { createProjectionRunner } from '../../readModel/projectionRunner.ts';
import { compareStates, replayStore } from '../../readModel/replay.ts';
import { builtStates, openSnapshot } from '../../readModel/snapshot/snapshotFile.ts';
import { checkIdentity } from '../../readModel/snapshot/trust.ts';
import { mustReadArchive } from '../../store/archive/withoutArchive.ts';
import { ConvergeError, errorCodes } from '../../core/errors.ts';
import type { ErrorCode } from '../../core/errors.ts';
import type { Run } from '../command.ts';
import { sqliteFileOf, withStore } from '../command.ts';
import type { CliIo } from '../io.ts';
import { makeLogger } from '../logger.ts';
import { printJson, printJsonLines, progress } from '../output.ts';
import type { ReplayWorkerData, ReplayWorkerMessage } from './replayWorker.ts';

// Verify against the snapshot the engine last wrote (the persisted live read model) when there
// is one; otherwise against the engine's own incremental path (subscription + read model),
// which is what a live `serve` runs.
export const run: Run = ({ io, values, config, json }) => {
  if (values.verify !== true) throw new ConvergeError('CONVERGE_ERR_USAGE', 'replay needs --verify (it only ever reads)');
  return withStore(config, io, async (store) => {
    // Both folds start at position zero, the live path's on a worker of its own too: say so before either starts.
    await mustReadArchive(store, 'replay --verify');
    const head = await store.headPosition();
    const snap =
      config.snapshotPath === null
        ? null
        : await openSnapshot(config.snapshotPath, config.snapshotFormerPath).catch((err: unknown) => {
            throw unusable(config.snapshotPath!, err);
          });
    // The default snapshot beside the store may not exist yet; one the operator named must.
    const named = values.snapshot !== undefined || io.env['CONVERGE_SNAPSHOT'] !== undefined;
    if (snap === null && named)
      throw new ConvergeError('CONVERGE_ERR_SNAPSHOT_INVALID', `snapshot ${config.snapshotPath ?? ''} does not exist`);
    const p = progress(io, 'replaying');
    const onProgress = (_n: number, pos: bigint): void => p.update(Number(pos), head === null ? null : Number(head));
    let against: string;
    let replayed: Map<string, NodeState>;
    let actual: Iterable<NodeState>;
    if (snap !== null) {
      // A snapshot of another fold (an older engine's) or another store would be compared field by
      // field and every difference blamed on the model: say what it is instead, as serve does.
      await checkIdentity(store, snap).catch((err: unknown) => {
        throw unusable(snap.path, err);
      });
      replayed = await replayStore(store, { until: snap.position, onProgress });
      p.done();
      against = `snapshot ${snap.path} at position ${snap.position}`;
      actual = builtStates(snap.states);
    } else {
      against = 'the live projection path (subscription into the read model)';
      // The two folds are independent (each reads the store itself), so on a store a second
      // connection can open, the replay runs on a worker thread while this one catches the
      // projection runner up: two cores, about the time of the slower fold instead of the sum.
      // Both stop at the head read above; if the runner folded further (a serve appending
      // meanwhile), the replay is folded again to the runner's own position, as before.
      const url = storeUrlOf(config, io);
      const archiveDir = config.archiveDir === null ? null : resolve(io.cwd, config.archiveDir);
      const replaying = url === null ? null : replayOnWorker(url, head, archiveDir, onProgress);
      // A failure of one fold must not leave the other's rejection unheard.
      replaying?.promise.catch(() => undefined);
      // Per event: the path a live engine folds each new event through is the one under test
      // (a cold start's bulk catch-up is the draft fold, which the replay itself runs).
      const runner = createProjectionRunner({ store, logger: makeLogger(config.logLevel), catchUp: 'per-event' });
      try {
        await runner.start();
        await runner.caughtUp();
      } catch (err) {
        replaying?.stop();
        throw err;
      } finally {
        await runner.stop();
      }
      actual = [...runner.readModel.nodes()];
      const at = runner.readModel.position();
      if (replaying !== null && at === head) replayed = await replaying.promise;
      else {
        replaying?.stop();
        replayed = at === null ? new Map() : await replayStore(store, { until: at, onProgress });
      }
      p.done();
    }
    const diffs = compareStates(replayed, actual);
    if (json) {
      printJsonLines(io, diffs);
      printJson(io, { verified: diffs.length === 0, nodes: replayed.size, against, differences: diffs.length });
    } else {
      for (const d of diffs) io.stdout(`${d.node}  ${d.field}: replay=${d.expected} live=${d.actual}\n`);
      io.stdout(
        `${replayed.size} nodes replayed against ${against}: ${diffs.length === 0 ? 'no difference' : `${diffs.length} difference(s)`}\n`,
      );
    }
    if (diffs.length > 0)
      throw new ConvergeError('CONVERGE_ERR_REPLAY_MISMATCH', `replay disagrees with ${against} in ${diffs.length} field(s)`);
    return 0;
  });
};

/** A snapshot replay cannot verify against, and what to do about it. */
const unusable = (path: string, err: unknown): ConvergeError =>
  new ConvergeError(
    'CONVERGE_ERR_SNAPSHOT_INVALID',
    `snapshot ${path} cannot be verified against: ${(err as Error).message.replace(`snapshot ${path}: `, '')}. serve discards it and writes a new one; remove it to verify against the live projection path, or name another with --snapshot`,
    { cause: err, ...(err instanceof ConvergeError && err.details !== undefined ? { details: err.details } : {}) },
  );

/** The store as a worker's own connection opens it: a SQLite file (resolved), or a server's URL; null: fold on this thread. */
function storeUrlOf(config: Config, io: CliIo): string | null {
  // Run from source (tsx), a worker thread would not have the loader that reads .ts: fold here.
  if (import.meta.url.endsWith('.ts')) return null;
  const file = sqliteFileOf(config, io);
  if (file !== null) return `sqlite:${file}`;
  return config.store.startsWith('sqlite:') || config.store.startsWith('memory') ? null : config.store;
}

/** replayStore on a worker thread (replayWorker.ts) over its own connection to `url`, up to `until`. */
function replayOnWorker(
  url: string,
  until: bigint | null,
  archiveDir: string | null,
  onProgress: (folded: number, position: bigint) => void,
): { promise: Promise<Map<string, NodeState>>; stop: () => void } {
  const worker = new Worker(new URL('./replayWorker.js', import.meta.url), {
    workerData: { url, until, archiveDir } satisfies ReplayWorkerData,
  });
  let settled = false;
  const promise = new Promise<Map<string, NodeState>>((resolve, reject) => {
    const settle = (f: () => void): void => {
      if (settled) return;
      settled = true;
      f();
      void worker.terminate();
    };
    worker.on('message', (m: ReplayWorkerMessage) => {
      if (m.kind === 'progress') onProgress(m.folded, m.position);
      else if (m.kind === 'done') settle(() => resolve(m.states as Map<string, NodeState>));
      else
        settle(() =>
          reject(
            new ConvergeError(
              m.code !== null && Object.hasOwn(errorCodes, m.code) ? (m.code as ErrorCode) : 'CONVERGE_ERR_INTERNAL',
              m.message,
            ),
          ),
        );
    });
    worker.on('error', (err) => settle(() => reject(err)));
    worker.on('exit', (code) => settle(() => reject(new Error(`the replay worker exited (${code}) before it answered`))));
  });
  return {
    promise,
    stop: () => {
      settled = true;
      void worker.terminate();
    },
  };
}
