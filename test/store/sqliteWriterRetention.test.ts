// What the SQLite store's side of its writer thread keeps while a commit waits: nothing of the
// encoded events once they are posted. Held across the round trip (a parameter or local of an
// async function stays alive across its await), every event's JSON outlived the engine thread's
// young generation and was copied by its scavenges (docs/design.md "Sharing the event loop").
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { after, test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { uuidV5 } from '../../src/core/events/index.ts';
import type { NewEvent } from '../../src/store/index.ts';
import { defaultMaxEventBytes, encodeWrites } from '../../src/store/appendRules.ts';
import type { EncodedWrite } from '../../src/store/appendRules.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { startWriterThread } from '../../src/store/sqlite/sqliteWriterClient.ts';
import type { WriterClient } from '../../src/store/sqlite/sqliteWriterClient.ts';

const dir = mkdtempSync(join(tmpdir(), 'converge-writer-retention-'));
after(() => rmSync(dir, { recursive: true, force: true }));

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const alive = (i: number): NewEvent =>
  ({
    id: uuidV5(`writer-retention/${i}`),
    type: 'AliveSeen',
    data: { node: 'a', seenAt: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString() },
  }) as NewEvent;

/** The writes in a box and a weak reference to them, made here so no frame of the test holds them. */
const prepare = () => {
  const box: { writes: EncodedWrite[] | null } = {
    writes: encodeWrites([{ stream: 'node-a', expected: 'no_stream', events: [alive(0), alive(1)] }], defaultMaxEventBytes),
  };
  return { box, posted: new WeakRef(box.writes!) };
};

/** Posts what the box holds and empties it, so no frame of the test's own still refers to it. */
const post = (client: WriterClient, box: { writes: EncodedWrite[] | null }) => {
  const writes = box.writes!;
  box.writes = null;
  return client.append(writes, 0);
};

test('the writer client keeps nothing of the encoded writes while the thread commits them', async () => {
  const path = join(dir, 'store.db');
  // The store makes the file and its tables; its own writer thread is not the one under test.
  await createSqliteEventStore(path, { sync: 'full' }).close();
  const client = startWriterThread({ path, busyTimeoutMs: 1_000 });
  try {
    await client.setCheckpoint('warm', 0n);
    const { box, posted } = prepare();
    // A WeakRef holds its target to the end of the job that made it: collect in a later one.
    await nextTurn();
    const written = post(client, box);
    // In this same job, so the thread's answer cannot have come yet: the append is waiting on it.
    gc();
    assert.equal(posted.deref(), undefined, 'the encoded writes are still held while the commit waits');
    assert.equal((await written).written[0], 2);
  } finally {
    await client.close();
  }
});
