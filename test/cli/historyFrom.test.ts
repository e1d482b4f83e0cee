import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { onArchiveStores } from '../support/archiveStores.ts';
import type { ArchiveStore } from '../support/archiveStores.ts';
import { cliIn } from '../support/cliInProcess.ts';
import type { EventStore } from '../../src/store/port.ts';
import { historyInStore } from '../support/history.ts';

// `converge history <node> --from <t>` over an archive (docs/store.md "Skipping segments before a
// moment"): the segments that end well before `--from` are not read, and every entry is classified
// as the fold from the stream's first event classifies it — with those files gone the command
// answers as the store did before any move, by time and by position, with and without --to.

const dir = mkdtempSync(join(tmpdir(), 'converge-history-from-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const dayMs = 86_400_000;

/** 100 days to ten days ago: n0 sent a declaration every fourth day, and reports daily (matching, stale, undeclared). */
async function fleet(store: EventStore): Promise<{ start: number; end: number; head: bigint }> {
  const start = Date.now() - 110 * dayMs;
  const h = historyInStore(store, start);
  for (let day = 0; day < 100; day++) {
    if (day % 4 === 0) await h.send('n0', [{ id: 'web', version: `1.${day}` }]);
    h.tick(3_600_000);
    const sent = h.digests('n0');
    const declared = day % 5 === 3 ? null : day % 3 === 1 ? sent[Math.max(0, sent.length - 2)]! : sent.at(-1)!;
    await h.report('n0', { declared, applied: ['web'] });
    for (const n of ['n1', 'n2', 'n3']) {
      await h.alive(n);
      await h.report(n);
    }
    h.tick(3_600_000);
    await h.alive('n0');
    h.tick(dayMs - 2 * 3_600_000);
  }
  const head = (await store.headPosition())!;
  await store.close();
  return { start, end: start + 100 * dayMs, head };
}

async function fromReadsNoSegmentBeforeIt(kind: ArchiveStore): Promise<void> {
  const f = await fleet(kind.open());
  const env = { CONVERGE_STORE: kind.url };
  const archive = join(dir, `archive-${kind.name}`);
  const history = (args: readonly string[]) => cliIn(dir, ['history', 'n0', ...args], env);
  const iso = (frac: number): string => new Date(f.start + frac * (f.end - f.start)).toISOString();
  const windows = [
    ['--from', iso(0.7)],
    ['--from', iso(0.6), '--to', iso(0.8)],
    ['--from', ((f.head * 7n) / 10n).toString(), '--limit', '5'],
  ];
  const answer = async (args: readonly string[]): Promise<string[]> => {
    const r = await history([...args, '--json']);
    const text = await history(args);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(text.code, 0, text.stderr);
    return [r.stdout, text.stdout];
  };

  // Before any move: the answers, read from the store whole.
  const before = await Promise.all(windows.map(answer));
  for (const [json] of before) assert.ok(json!.split('\n').length > 5, json);
  assert.match(before[0]![0]!, /"class":"stale"/);

  const moved = await kind.archive({ dir: archive, before: new Date().toISOString(), belowPosition: f.head, segmentEvents: 20 });
  assert.ok(moved.segments.length >= 30, `${moved.segments.length} segments`);
  const withArchive = ['--archive-dir', archive];
  for (const [i, w] of windows.entries()) assert.deepEqual(await answer([...w, ...withArchive]), before[i], 'read through every segment');

  // Every segment whose events all come before the first half of the history, gone.
  const store = kind.open();
  const manifest = await store.archiveManifest!();
  await store.close();
  const early = manifest.segments.filter((s) => s.maxTime! < Date.parse(iso(0.5)));
  assert.ok(early.length >= moved.segments.length / 3, `${early.length} of ${moved.segments.length} segments before the windows`);
  for (const s of early) renameSync(join(archive, s.file), join(dir, `${kind.name}-${s.file}.gone`));
  for (const [i, w] of windows.entries())
    assert.deepEqual(await answer([...w, ...withArchive]), before[i], `${w.join(' ')}: the same answer without the early segments`);
  // A read of the whole history needs them: the files were really gone.
  assert.notEqual((await history(withArchive)).code, 0);
}

onArchiveStores(dir, 'history --from', 'opens no segment well before it, and answers as before the move', fromReadsNoSegmentBeforeIt);
