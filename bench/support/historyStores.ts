// The SQLite stores bench/history.ts writes and starts from: a store whose appends are metered
// by type and day (SQLite's own page accounting), and the cold and warm starts of the engine's
// read model over such a store, the warm ones timed in wall and CPU seconds.
import { copyFileSync, existsSync, rmSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import pino from 'pino';
import { observationStream, streamOf } from '../../src/core/events/index.ts';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import type { ProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import type { EventStore, NewEvent, StreamWrite } from '../../src/store/index.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';

const logger = pino({ level: 'silent' });

/** A store whose appends are metered: bytes (pages in use) and events, by type and by day. */
export function meteredStore(path: string) {
  // synchronous=NORMAL: how often the WAL is synced changes nothing on disk but the time to write.
  let store: EventStore = createSqliteEventStore(path, { synchronous: 'NORMAL' });
  const meter = new Database(path, { readonly: true });
  const pageSize = meter.pragma('page_size', { simple: true }) as number;
  const used = (): number =>
    ((meter.pragma('page_count', { simple: true }) as number) - (meter.pragma('freelist_count', { simple: true }) as number)) * pageSize;
  const bytes = new Map<string, number>();
  const counts = new Map<string, number>();
  let day = new Map<string, number>();
  const add = (m: Map<string, number>, k: string, n: number): void => void m.set(k, (m.get(k) ?? 0) + n);
  return {
    store: () => store,
    used,
    bytes,
    counts,
    /** Append events of one type (at most one per stream per call keeps order plain), metered. */
    async append(events: readonly NewEvent[]): Promise<void> {
      for (let i = 0; i < events.length; i += 2_000) {
        const chunk = events.slice(i, i + 2_000);
        const writes: StreamWrite[] = chunk.map((e) => ({
          stream: e.type.startsWith('Observation') ? observationStream : streamOf((e.data as { node: string }).node),
          expected: 'any',
          events: [e],
        }));
        const before = used();
        await store.append(writes);
        const type = chunk[0]!.type;
        add(bytes, type, used() - before);
        add(counts, type, chunk.length);
        add(day, type, chunk.length);
      }
    },
    /** Events by type since the last call. */
    takeDay(): Map<string, number> {
      const d = day;
      day = new Map();
      return d;
    },
    async reopen(): Promise<void> {
      await store.close();
      store = createSqliteEventStore(path, { synchronous: 'NORMAL' });
    },
    async close(): Promise<void> {
      await store.close();
      meter.close();
    },
  };
}
export type Metered = ReturnType<typeof meteredStore>;

/** Cold start (fold from zero), then a snapshot written for the warm starts. */
export async function coldStart(path: string): Promise<number> {
  const snapshot = { path: `${path}.snapshot`, everyEvents: 1e12 };
  rmSync(snapshot.path, { force: true });
  const t = performance.now();
  const store = createSqliteEventStore(path);
  const runner = createProjectionRunner({ store, logger, snapshot });
  await runner.start();
  await runner.caughtUp();
  const coldS = (performance.now() - t) / 1000;
  await runner.writeSnapshot();
  await runner.stop();
  await store.close();
  return coldS;
}

/** CPU seconds of this process for each warm start, beside its wall time (the shared machine's load moves the wall far more). */
export const warmCpu = new Map<string, number[]>();

export type Restored = Readonly<{ runner: ProjectionRunner; wallS: number; cpuS: number; close: () => Promise<void> }>;

/** Open the store and restore the read model from its snapshot, caught up: the wall and CPU seconds of this process it took. */
export async function restoreFromSnapshot(path: string): Promise<Restored> {
  const cpu0 = process.cpuUsage();
  const t = performance.now();
  const store = createSqliteEventStore(path);
  const runner = createProjectionRunner({ store, logger, snapshot: { path: `${path}.snapshot`, everyEvents: 1e12 } });
  await runner.start();
  await runner.caughtUp();
  const wallS = (performance.now() - t) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const close = async (): Promise<void> => {
    await runner.stop();
    await store.close();
  };
  return { runner, wallS, cpuS: (cpu.user + cpu.system) / 1e6, close };
}

/** A warm start (restoreFromSnapshot); it must hold `nodes` nodes. Wall seconds. */
export async function warmStart(path: string, nodes: number): Promise<number> {
  const { runner, wallS, cpuS, close } = await restoreFromSnapshot(path);
  warmCpu.set(path, [...(warmCpu.get(path) ?? []), cpuS]);
  if (runner.readModel.size() !== nodes) throw new Error(`warm start gave ${runner.readModel.size()} nodes`);
  await close();
  return wallS;
}

/** A closed SQLite store and its snapshot, copied whole (the day-1 store, kept to start beside the end's). */
export function copyStore(from: string, to: string): void {
  for (const suffix of ['', '-wal', '.snapshot']) if (existsSync(from + suffix)) copyFileSync(from + suffix, to + suffix);
}
