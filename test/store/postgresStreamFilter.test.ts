import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { streamOf } from '../../src/core/events/index.ts';
import { withArchive } from '../../src/store/archive/withArchive.ts';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import { archivePostgresStore } from '../../src/store/postgres/postgresArchive.ts';
import { describeOnPostgres, runSql, scratchSchema } from '../support/postgres.ts';
import type { ScratchSchema } from '../support/postgres.ts';
import { randomFleet, streams, unfiltered } from '../support/randomArchiveFleet.ts';

// The segments' stream filters on PostgreSQL (docs/operations.md "Retention and archive"), as on
// SQLite (archiveStreamFilter.test.ts): a read of one stream skips the segments whose filter rules
// it out and gives exactly the unfiltered read's events; segments the release before archived have
// no filter, are opened, and get one from the next archive run.

describeOnPostgres('stream filters on a PostgreSQL store', () => {
  const dir = mkdtempSync(join(tmpdir(), 'converge-pg-stream-filter-'));
  const scratches: ScratchSchema[] = [];
  after(async () => {
    for (const s of scratches) await s.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('filtered reads equal unfiltered ones and the original store; unfiltered segments are opened, then filtered', async () => {
    const scratch = scratchSchema('converge_pg_filter');
    scratches.push(scratch);
    const archive = join(dir, scratch.schema);
    const { nodes, head } = await randomFleet(createPostgresEventStore(scratch.url), 4);
    const before = await streams(createPostgresEventStore(scratch.url), nodes);
    const cutoff = (days: number): string => new Date(Date.now() - days * 86_400_000).toISOString();
    const first = await archivePostgresStore(scratch.url, { dir: archive, before: cutoff(60), belowPosition: head, segmentEvents: 37 });
    // As the release before left them: segments with no filter rows.
    await runSql(`DELETE FROM ${scratch.schema}.archive_stream_filter`);
    const second = await archivePostgresStore(scratch.url, { dir: archive, before: cutoff(0), belowPosition: head, segmentEvents: 37 });
    assert.ok(first.segments.length >= 3 && second.segments.length >= 5, `${first.segments.length} + ${second.segments.length} segments`);
    // The second run back-filled the first run's segments; take them back out to read them unfiltered.
    await runSql(`DELETE FROM ${scratch.schema}.archive_stream_filter WHERE file IN (${first.segments.map((f) => `'${f}'`).join(', ')})`);

    const opened: string[] = [];
    const filtered = await streams(
      await withArchive(createPostgresEventStore(scratch.url), archive, { onOpen: (f) => opened.push(f) }),
      nodes,
    );
    const plain = await streams(await withArchive(unfiltered(createPostgresEventStore(scratch.url)), archive), nodes);
    assert.deepEqual(filtered, plain);
    assert.deepEqual(filtered, before, 'and the events the store held before any move');
    for (const f of first.segments) assert.ok(opened.includes(f), `${f}, with no filter, is opened`);

    const probe = await withArchive(createPostgresEventStore(scratch.url), archive, { onOpen: (f) => opened.push(f) });
    const seen = opened.length;
    assert.deepEqual(await probe.readStream(streamOf('never-seen')), []);
    assert.deepEqual(
      opened.slice(seen).sort(),
      [...first.segments].sort(),
      'only the unfiltered segments are opened for a stream none holds',
    );
    await probe.close();

    // The next run gives them their filters: then no segment is opened for it, and the answers stay.
    await archivePostgresStore(scratch.url, { dir: archive, before: cutoff(0), belowPosition: head, segmentEvents: 37 });
    const late: string[] = [];
    const refilled = await withArchive(createPostgresEventStore(scratch.url), archive, { onOpen: (f) => late.push(f) });
    assert.deepEqual(await refilled.readStream(streamOf('never-seen')), []);
    assert.deepEqual(late, [], 'no segment opened for a stream none holds');
    await refilled.close();
    assert.deepEqual(await streams(await withArchive(createPostgresEventStore(scratch.url), archive), nodes), before);
  });
});
