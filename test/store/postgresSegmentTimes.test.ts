import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import type { At } from '../../projections/index.ts';
import { withArchive } from '../../src/store/archive/withArchive.ts';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import { archivePostgresStore } from '../../src/store/postgres/postgresArchive.ts';
import { describeOnPostgres, runSql, scratchSchema } from '../support/postgres.ts';
import type { ScratchSchema } from '../support/postgres.ts';
import { prng } from '../support/prng.ts';
import { answers, moments, randomFleet, untimed } from '../support/steppedFleet.ts';

// The segments' time ranges on PostgreSQL (docs/store.md "Segment time ranges"): recorded by the
// move, filled in for segments archived without one, and a read as of a moment answers as before.

describeOnPostgres('segment time ranges on a PostgreSQL store', () => {
  const dir = mkdtempSync(join(tmpdir(), 'converge-pg-segment-times-'));
  const scratches: ScratchSchema[] = [];
  after(async () => {
    for (const s of scratches) await s.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('state as of many moments is the same with the time ranges, without them, and before any move', async () => {
    const scratch = scratchSchema('converge_pg_segment_times');
    scratches.push(scratch);
    const archive = join(dir, scratch.schema);
    const f = await randomFleet(createPostgresEventStore(scratch.url), 5, true);
    const at = moments(f, prng(77)).filter((_, i) => i % 2 === 0);
    const nodes = [...f.nodes, 'never-seen'];
    const original = await answers(createPostgresEventStore(scratch.url), nodes, at);
    const middle = new Date((f.start + f.end) / 2).toISOString();
    const first = await archivePostgresStore(scratch.url, { dir: archive, before: middle, belowPosition: f.head, segmentEvents: 29 });
    const now = new Date().toISOString();
    const second = await archivePostgresStore(scratch.url, { dir: archive, before: now, belowPosition: f.head, segmentEvents: 29 });
    assert.ok(first.segments.length >= 3 && second.segments.length >= 5, `${first.segments.length} + ${second.segments.length} segments`);
    // The first run's segments as the release before leaves them: no time range.
    await runSql(`DELETE FROM ${scratch.schema}.archive_segment_times WHERE file IN (${first.segments.map((f) => `'${f}'`).join(', ')})`);

    const before = await (async () => {
      const s = createPostgresEventStore(scratch.url);
      try {
        return await s.archiveManifest!();
      } finally {
        await s.close();
      }
    })();
    assert.deepEqual(
      before.segments.filter((s) => s.minTime === undefined).map((s) => s.file),
      first.segments,
      "the first run's segments have no range, the second's have theirs",
    );
    const timed = await answers(await withArchive(createPostgresEventStore(scratch.url), archive), nodes, at);
    const whole = await answers(await withArchive(untimed(createPostgresEventStore(scratch.url)), archive), nodes, at);
    assert.deepEqual(whole, original);
    assert.deepEqual(timed, original);

    // The next run fills the missing ranges in; the answers stay, with fewer segments opened.
    await archivePostgresStore(scratch.url, { dir: archive, before: now, belowPosition: f.head, segmentEvents: 29 });
    const store = createPostgresEventStore(scratch.url);
    const manifest = await store.archiveManifest!();
    await store.close();
    assert.ok(
      manifest.segments.every((s) => s.minTime !== undefined && s.minTime <= s.maxTime!),
      'every segment has its range',
    );
    assert.deepEqual(await answers(await withArchive(createPostgresEventStore(scratch.url), archive), nodes, at), original);
    // Early in the history, a read leaves most segments unopened.
    const time = f.start + 0.1 * (f.end - f.start);
    const early: At = { kind: 'time', time, iso: new Date(time).toISOString() };
    const opened = { timed: 0, whole: 0 };
    const timedEarly = await answers(
      await withArchive(createPostgresEventStore(scratch.url), archive, { onOpen: () => opened.timed++ }),
      ['n0'],
      [early],
    );
    const wholeEarly = await answers(
      await withArchive(untimed(createPostgresEventStore(scratch.url)), archive, { onOpen: () => opened.whole++ }),
      ['n0'],
      [early],
    );
    assert.deepEqual(timedEarly, wholeEarly);
    assert.ok(opened.timed < opened.whole / 2, `${opened.timed} segments opened with the ranges, ${opened.whole} without`);
  });
});
