import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, test } from 'node:test';
import pg from 'pg';
import type { Recorded } from '../../src/core/events/index.ts';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import type { EventStore, StreamWrite } from '../../src/store/index.ts';
import { describeOnPostgres, postgresTestUrl, scratchSchema } from '../support/postgres.ts';
import { until } from '../support/until.ts';

// The trap every PostgreSQL event store meets: positions handed out at insert time,
// commits landing in another order, and a reader "after position P" skipping the event that
// commits late with a lower position. The adapter serialises appends on its head counter
// (src/store/postgres/append.ts). These tests put a subscriber against appenders that commit
// late on purpose, and check it sees every acknowledged event exactly once, in position order;
// the last one runs the same late-commit interleaving on a plain sequence-ordered table and
// shows the same check catching the skip.

/** What a reader must see: each acknowledged id once, nothing else, positions strictly rising. */
function problems(acknowledged: readonly string[], seen: readonly { id: string; position: bigint }[]): string[] {
  const out: string[] = [];
  const count = new Map<string, number>();
  for (const e of seen) count.set(e.id, (count.get(e.id) ?? 0) + 1);
  const missing = acknowledged.filter((id) => !count.has(id));
  if (missing.length > 0) out.push(`${missing.length} acknowledged events never seen (first ${missing[0]})`);
  const twice = [...count].filter(([, n]) => n > 1);
  if (twice.length > 0) out.push(`${twice.length} events seen more than once`);
  const known = new Set(acknowledged);
  const stray = seen.filter((e) => !known.has(e.id));
  if (stray.length > 0) out.push(`${stray.length} events seen that nobody acknowledged`);
  for (let i = 1; i < seen.length; i++) {
    if (seen[i]!.position <= seen[i - 1]!.position) {
      out.push(`position ${seen[i]!.position} seen after ${seen[i - 1]!.position}`);
      break;
    }
  }
  return out;
}

const alive = (node: string): StreamWrite['events'][number] => ({
  id: randomUUID(),
  type: 'AliveSeen',
  data: { node, seenAt: '2024-01-01T00:00:00.000Z' },
});

/** A subscriber on its own store handle (so only LISTEN/NOTIFY or the poll can wake it). */
function follow(store: EventStore): { seen: Recorded[]; stop: () => Promise<void> } {
  const seen: Recorded[] = [];
  const sub = store.subscribe({ batchSize: 7, handler: (events) => void seen.push(...events) });
  return { seen, stop: () => sub.stop() };
}

describeOnPostgres('PostgreSQL store: a subscriber never skips an event that commits late', () => {
  const scratch = scratchSchema('converge_noskip');
  const admin = new pg.Pool({ connectionString: postgresTestUrl, max: 3 });
  admin.on('error', () => undefined);
  after(async () => {
    await scratch.drop();
    await admin.end();
  });
  const s = scratch.schema;

  void test('an append that took its positions and commits late is seen before a later append, which waits for it', async () => {
    const writer = createPostgresEventStore(scratch.url, { pollMs: 60_000 });
    const other = createPostgresEventStore(scratch.url, { pollMs: 60_000 });
    const reader = createPostgresEventStore(scratch.url, { pollMs: 60_000 });
    try {
      await writer.headPosition(); // creates the schema
      // Appends to node-slow sleep inside their statement, after they have taken their positions.
      await admin.query(`
        CREATE FUNCTION ${s}.slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF EXISTS (SELECT 1 FROM new_rows WHERE stream = 'node-slow') THEN PERFORM pg_sleep(0.5); END IF;
          RETURN NULL;
        END $$;
        CREATE TRIGGER slow_commit AFTER INSERT ON ${s}.events REFERENCING NEW TABLE AS new_rows
          FOR EACH STATEMENT EXECUTE FUNCTION ${s}.slow_commit();`);
      const head = await reader.headPosition();
      const sub = follow(reader);
      const slowEvents = [alive('slow'), alive('slow')];
      const slow = writer.append([{ stream: 'node-slow', expected: 'any', events: slowEvents }]);
      await until(
        'the slow append to be inside its statement',
        async () =>
          (await admin.query("SELECT 1 FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND strpos(query, $1) > 0", [`${s}.head`]))
            .rowCount === 1,
      );
      const fastEvents = [alive('fast')];
      const fast = await other.append([{ stream: 'node-fast', expected: 'any', events: fastEvents }]);
      const slowResult = await slow;
      assert.ok(slowResult.position! < fast.position!, 'the late committer holds the lower positions');
      const acknowledged = [...slowEvents, ...fastEvents].map((e) => e.id);
      const mine = () => sub.seen.filter((e) => head === null || e.position > head);
      await until('both appends', () => mine().length >= acknowledged.length);
      await sub.stop();
      assert.deepEqual(problems(acknowledged, mine()), []);
      await admin.query(`DROP TRIGGER slow_commit ON ${s}.events`);
    } finally {
      await Promise.all([writer.close(), other.close(), reader.close()]);
    }
  });

  void test('four concurrent appenders and a live subscriber: every acknowledged event is seen exactly once, in position order', async () => {
    const appenders = Array.from({ length: 4 }, () => createPostgresEventStore(scratch.url, { pollMs: 60_000 }));
    const reader = createPostgresEventStore(scratch.url, { pollMs: 60_000 });
    try {
      const head = await reader.headPosition();
      // Every append now lingers up to 3 ms between taking its positions and committing: the
      // window in which a sequence-ordered log lets a reader overtake it.
      await admin.query(`
        CREATE FUNCTION ${s}.jitter() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_sleep(random() * 0.003); RETURN NULL; END $$;
        CREATE TRIGGER jitter AFTER INSERT ON ${s}.events FOR EACH STATEMENT EXECUTE FUNCTION ${s}.jitter();`);
      const sub = follow(reader);
      const acknowledged: string[] = [];
      await Promise.all(
        appenders.map(async (store, a) => {
          for (let b = 0; b < 40; b++) {
            const writes: StreamWrite[] = Array.from({ length: 1 + ((a + b) % 3) }, (_, w) => ({
              stream: `node-load-${(a * 7 + b + w * 3) % 11}`,
              expected: 'any',
              events: Array.from({ length: 1 + ((b * 5 + w) % 4) }, () => alive('load')),
            }));
            await store.append(writes);
            for (const w of writes) for (const e of w.events) acknowledged.push(e.id);
          }
        }),
      );
      const mine = () => sub.seen.filter((e) => head === null || e.position > head);
      await until(`${acknowledged.length} events`, () => mine().length >= acknowledged.length);
      await new Promise((r) => setTimeout(r, 100));
      await sub.stop();
      assert.deepEqual(problems(acknowledged, mine()), []);
      await admin.query(`DROP TRIGGER jitter ON ${s}.events`);
    } finally {
      await Promise.all([...appenders.map((x) => x.close()), reader.close()]);
    }
  });

  void test('the same late commit on a naive sequence-ordered table (WHERE position > $1) makes the reader skip it', async () => {
    // A plain bigserial log and the obvious reader: what the adapter would be without its counter.
    await admin.query(`CREATE TABLE ${s}.naive (position bigserial PRIMARY KEY, id uuid NOT NULL UNIQUE)`);
    const readAfter = async (p: bigint): Promise<{ id: string; position: bigint }[]> =>
      (
        await admin.query<{ id: string; position: string }>(`SELECT id, position FROM ${s}.naive WHERE position > $1 ORDER BY position`, [
          String(p),
        ])
      ).rows.map((r) => ({ id: r.id, position: BigInt(r.position) }));
    const seen: { id: string; position: bigint }[] = [];
    let position = 0n;
    const poll = async (): Promise<void> => {
      const batch = await readAfter(position);
      seen.push(...batch);
      if (batch.length > 0) position = batch[batch.length - 1]!.position;
    };
    const late = await admin.connect();
    try {
      const [slowId, fastId] = [randomUUID(), randomUUID()];
      await late.query('BEGIN');
      await late.query(`INSERT INTO ${s}.naive (id) VALUES ($1)`, [slowId]); // takes position 1, not committed
      await admin.query(`INSERT INTO ${s}.naive (id) VALUES ($1)`, [fastId]); // takes 2, commits at once
      await poll(); // the reader sees 2 and moves past 1
      await late.query('COMMIT');
      await poll();
      assert.deepEqual(problems([slowId, fastId], seen), [`1 acknowledged events never seen (first ${slowId})`]);
    } finally {
      late.release();
    }
  });
});
