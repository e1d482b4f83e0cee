import { parentPort, workerData } from 'node:worker_threads';
import { ConvergeError } from '../../core/errors.ts';
import { replayStore } from '../../readModel/replay.ts';
import { openEventStore } from '../../store/index.ts';

// `replay --verify`'s replay from zero, on a thread of its own (replay.ts): its own connection to
// the store, the pure fold, and the states posted back, while the main thread folds the same store
// through the live projection path. The two folds share nothing but the file.

export type ReplayWorkerData = Readonly<{ url: string; until: bigint | null; archiveDir: string | null }>;
export type ReplayWorkerMessage =
  | Readonly<{ kind: 'progress'; folded: number; position: bigint }>
  | Readonly<{ kind: 'done'; states: Map<string, unknown> }>
  | Readonly<{ kind: 'failed'; code: string | null; message: string }>;

const port = parentPort;
if (port === null) throw new Error('replayWorker.ts runs as a worker thread');
const { url, until, archiveDir } = workerData as ReplayWorkerData;
const post = (m: ReplayWorkerMessage): void => port.postMessage(m);
try {
  const opened = await openEventStore(url);
  try {
    // With an archive, the replay reads it too (docs/operations.md "Retention and archive").
    const store = archiveDir === null ? opened : await (await import('../../store/archive/withArchive.ts')).withArchive(opened, archiveDir);
    const states = await replayStore(store, { until, onProgress: (folded, position) => post({ kind: 'progress', folded, position }) });
    post({ kind: 'done', states });
  } finally {
    await opened.close();
  }
} catch (err) {
  post({ kind: 'failed', code: err instanceof ConvergeError ? err.code : null, message: err instanceof Error ? err.message : String(err) });
}
