import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { onArchiveStores } from '../support/archiveStores.ts';
import type { ArchiveStore } from '../support/archiveStores.ts';
import { cliIn } from '../support/cliInProcess.ts';
import { randomFleet } from '../support/steppedFleet.ts';

// `converge history <node> --from <t> --to <t>` over an archive (docs/store.md "Segment time
// ranges"): the history as it stood at `--to`, from `--from` on, read without the segments whose
// events all come after `--to` — with those files gone it answers as the store did before any move.

const dir = mkdtempSync(join(tmpdir(), 'converge-history-window-'));
after(() => rmSync(dir, { recursive: true, force: true }));

async function windowReadsNoSegmentPastIt(kind: ArchiveStore): Promise<void> {
  const f = await randomFleet(kind.open(), 4, false);
  const env = { CONVERGE_STORE: kind.url };
  const archive = join(dir, `archive-${kind.name}`);
  const history = (args: readonly string[]) => cliIn(dir, ['history', 'n0', ...args], env);
  const entries = async (args: readonly string[]): Promise<unknown[]> => {
    const r = await history([...args, '--json']);
    assert.equal(r.code, 0, r.stderr);
    return r.stdout.split('\n').flatMap((l) => (l === '' ? [] : [JSON.parse(l) as unknown]));
  };
  const iso = (frac: number): string => new Date(f.start + frac * (f.end - f.start)).toISOString();
  const window = ['--from', iso(0.3), '--to', iso(0.5)];

  // Before any move: the answer, entries and the declarations they name (text), read from the store whole.
  const shown = await entries(window);
  const text = (await history(window)).stdout;
  const whole = await entries([]);
  assert.ok(shown.length > 0 && shown.length < whole.length / 2, `${shown.length} of ${whole.length} events in the window`);

  const moved = await kind.archive({ dir: archive, before: new Date().toISOString(), belowPosition: f.head, segmentEvents: 20 });
  assert.ok(moved.segments.length >= 20, `${moved.segments.length} segments`);
  const withArchive = ['--archive-dir', archive];
  assert.deepEqual(await entries([...window, ...withArchive]), shown, 'read through every segment');

  // Every segment whose events all come after the window, gone.
  const store = kind.open();
  const manifest = await store.archiveManifest!();
  await store.close();
  const to = Date.parse(iso(0.5));
  const past = manifest.segments.filter((s) => s.minTime! > to);
  assert.ok(past.length >= moved.segments.length / 3, `${past.length} of ${moved.segments.length} segments past the window`);
  for (const s of past) renameSync(join(archive, s.file), join(dir, `${kind.name}-${s.file}.gone`));
  assert.deepEqual(await entries([...window, ...withArchive]), shown, 'the same answer without the segments past the window');
  assert.equal((await history([...window, ...withArchive])).stdout, text);
  // A read of the whole history needs them: the files were really gone.
  assert.notEqual((await history(withArchive)).code, 0);
}

onArchiveStores(dir, 'history --from --to', 'opens no segment past --to, and answers as before the move', windowReadsNoSegmentPastIt);
