// The baseline of bench/engine.ts, run as its own process so it is measured from outside exactly
// as `converge serve` is: quorum queue → JSON.parse → better-sqlite3 batch of 500 (WAL,
// synchronous=FULL) → ack. Nothing else: no schema check, no sender check, no read model, no
// relay, no API. It writes the same row shape the engine stores (the v1 events table with a
// UUID per row, as bench/ingest.ts explains) into its own file on the same disk.
//   node --import tsx bench/engine/minimalPipeline.ts <amqp url> <sqlite path> <expected reports>
// Prints `consuming` once subscribed and `done <n>` once n rows are committed, then waits for
// stdin to close.
import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import type { ConsumeMessage } from 'amqplib';
import Database from 'better-sqlite3';

const [url, path, expectedText] = process.argv.slice(2);
if (url === undefined || path === undefined || expectedText === undefined) {
  console.error('usage: minimalPipeline.ts <amqp url> <sqlite path> <expected reports>');
  process.exit(2);
}
const expected = Number(expectedText);
const batch = 500;

const db = new Database(path);
db.pragma('journal_mode = WAL');
db.pragma('synchronous = FULL');
db.exec(`CREATE TABLE IF NOT EXISTS events (
  position INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE, stream TEXT NOT NULL, revision INTEGER NOT NULL,
  type TEXT NOT NULL, data TEXT NOT NULL, metadata TEXT NOT NULL, UNIQUE (stream, revision))`);
const insert = db.prepare('INSERT INTO events (id, stream, revision, type, data, metadata) VALUES (?, ?, ?, ?, ?, ?)');
const revisions = new Map<string, number>();
type Body = {
  node: string;
  applied?: string[] | null;
  failed?: Record<string, string> | null;
  refused?: string;
  carried?: number[] | null;
  declared?: string;
};
const insertMany = db.transaction((ms: ConsumeMessage[]) => {
  const receivedAt = new Date().toISOString();
  for (const m of ms) {
    const r = JSON.parse(m.content.toString()) as Body;
    const stream = `node-${r.node}`;
    const revision = (revisions.get(stream) ?? -1) + 1;
    revisions.set(stream, revision);
    const data = {
      node: r.node,
      declared: r.declared || null,
      applied: r.applied ?? [],
      failed: r.failed ?? {},
      refused: r.refused ?? '',
      carried: r.carried ?? [],
      receivedAt,
      transport: { messageId: String(m.properties.messageId), redelivered: m.fields.redelivered, userId: m.properties.userId ?? null },
    };
    insert.run(randomUUID(), stream, revision, 'ReportReceived', JSON.stringify(data), '{"v":2}');
  }
});

const conn = await amqp.connect(url);
const ch = await conn.createChannel();
await ch.prefetch(1000);
let done = 0;
let buf: ConsumeMessage[] = [];
let timer: NodeJS.Timeout | null = null;
const flush = (): void => {
  if (timer !== null) clearTimeout(timer);
  timer = null;
  const ms = buf;
  buf = [];
  if (ms.length === 0) return;
  insertMany(ms);
  ch.ack(ms[ms.length - 1]!, true);
  done += ms.length;
  if (done === expected) process.stdout.write(`done ${done}\n`);
};
await ch.consume('mesh.reports', (m) => {
  if (m === null) return;
  buf.push(m);
  if (buf.length >= batch) flush();
  else timer ??= setTimeout(flush, 10);
});
process.stdout.write('consuming\n');
process.stdin.resume();
process.stdin.on('end', () => {
  void conn.close().finally(() => {
    db.close();
    process.exit(0);
  });
});
