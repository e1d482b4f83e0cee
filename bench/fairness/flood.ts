// A flooding node for bench/fairness, run as its own process so its publishing does not share
// the engine's event loop: publishes reports as one enrolled node as fast as the broker confirms
// them (a window of unconfirmed publishes, as a Go node retrying in a tight loop would), until
// SIGTERM; prints how many it published on stdout when it ends.
//   node --import tsx bench/fairness/flood.ts <amqp url> <node> <small|wide|hostile> [most]
import amqp from 'amqplib';

const [url, node, kind, most] = process.argv.slice(2) as [string, string, 'small' | 'wide' | 'hostile', string | undefined];
const limit = most === undefined ? Infinity : Number(most);
const window = 256;

/** `small`: a routine report. `wide`: a `failed` map of `entries` short keys, ~262 KB at 22,000. */
function body(i: number): Buffer {
  if (kind === 'small') return Buffer.from(JSON.stringify({ node, applied: [`r${i}`, 'db'], carried: [8080] }));
  const entries = kind === 'hostile' ? 22_000 : Number(process.env['FLOOD_WIDE_ENTRIES'] ?? 10_000);
  const failed: Record<string, string> = {};
  for (let k = 0; k < entries; k++) failed[`k${(k * 7919 + i).toString(36)}`] = 'e';
  return Buffer.from(JSON.stringify({ node, failed }));
}

const conn = await amqp.connect(url);
const ch = await conn.createConfirmChannel();
let published = 0;
let stopping = false;
process.once('SIGTERM', () => (stopping = true));
// Wide bodies are built once per 16 and reused with fresh message ids: building them is not what is measured.
const cache = new Map<number, Buffer>();
const bodyOf = (i: number): Buffer => {
  if (kind === 'small') return body(i);
  const k = i % 16;
  let b = cache.get(k);
  if (b === undefined) cache.set(k, (b = body(k)));
  return b;
};
process.stderr.write('flooding\n');
while (!stopping && published < limit) {
  for (let n = 0; n < window && !stopping && published < limit; n++) {
    const ok = ch.publish('mesh', 'report', bodyOf(published), {
      persistent: true,
      userId: node,
      messageId: `flood-${process.pid}-${published}`,
      contentType: 'application/json',
    });
    published++;
    if (!ok) await new Promise((r) => ch.once('drain', r));
  }
  await ch.waitForConfirms().catch(() => (stopping = true));
}
await ch.waitForConfirms().catch(() => undefined);
process.stdout.write(`${published}\n`);
await conn.close();
