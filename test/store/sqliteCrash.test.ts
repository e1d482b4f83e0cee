import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createSqliteEventStore } from '../../src/store/index.ts';
import { batchEventIds } from './fixtures/sqliteAppender.ts';

// DESIGN §5: an acknowledged append survives the process dying at any instant, and a
// many-stream append is one transaction. A child appends multi-stream batches and reports each
// one only after append() resolved; we SIGKILL it at seeded random moments, then check the file.

const appender = fileURLToPath(new URL('./fixtures/sqliteAppender.ts', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'converge-crash-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** mulberry32: a seeded PRNG so a failing round can be replayed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Runs the child until it has reported `killAfter` batches plus a random extra delay, then SIGKILLs it. */
async function runAndKill(path: string, run: string, killAfter: number, extraMs: number): Promise<number[]> {
  const child = spawn(process.execPath, ['--import', 'tsx', appender, path, run], { stdio: ['ignore', 'pipe', 'inherit'] });
  const committed: number[] = [];
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, signal) => resolve(signal)));
  const lines = createInterface({ input: child.stdout });
  let armed = false;
  lines.on('line', (line) => {
    const m = /^committed (\S+)\/(\d+)$/.exec(line);
    if (m !== null && m[1] === run) committed.push(Number(m[2]));
    if (!armed && committed.length >= killAfter) {
      armed = true;
      setTimeout(() => child.kill('SIGKILL'), extraMs);
    }
  });
  const signal = await exited;
  assert.equal(signal, 'SIGKILL', 'the appender was killed mid-run, not finished or crashed');
  return committed;
}

const seed = Number(process.env.CONVERGE_CRASH_SEED ?? 20240601);

test(
  `every batch reported committed survives SIGKILL exactly once and no partial batch exists (seed ${seed})`,
  { timeout: 120_000 },
  async () => {
    const path = join(dir, 'crash.db');
    const random = prng(seed);
    const reported = new Map<string, number[]>();
    for (let round = 0; round < 5; round++) {
      const run = `r${round}`;
      reported.set(run, await runAndKill(path, run, 1 + Math.floor(random() * 30), Math.floor(random() * 40)));
    }

    const store = createSqliteEventStore(path);
    try {
      const counts = new Map<string, number>();
      let total = 0;
      for await (const batch of store.readAll()) {
        for (const e of batch) {
          counts.set(e.id, (counts.get(e.id) ?? 0) + 1);
          total++;
        }
      }
      let accounted = 0;
      for (const [run, committed] of reported) {
        assert.ok(committed.length > 0, `round ${run} reported at least one batch`);
        const last = Math.max(...committed);
        // Batches beyond the last reported one may have committed just before the kill.
        for (let b = 0; b <= last + 50; b++) {
          const ids = batchEventIds(run, b);
          const present = ids.filter((id) => counts.has(id)).length;
          assert.ok(present === 0 || present === ids.length, `batch ${run}/${b} is whole or absent, found ${present}/${ids.length} events`);
          if (committed.includes(b)) assert.equal(present, ids.length, `batch ${run}/${b} was reported committed`);
          for (const id of ids) if (counts.has(id)) assert.equal(counts.get(id), 1, `event ${id} stored once`);
          accounted += present;
        }
      }
      assert.equal(total, accounted, 'every stored event belongs to a batch a child wrote');
      // Stream revisions stay dense after crashes: no stream has a hole or a repeated revision.
      for (let s = 0; s < 13; s++) {
        const events = await store.readStream(`node-crash-${s}`);
        assert.deepEqual(
          events.map((e) => e.revision),
          events.map((_, i) => BigInt(i)),
        );
      }
    } finally {
      await store.close();
    }
  },
);
