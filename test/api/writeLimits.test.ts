import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createBatchSender } from '../../src/engine/sendBatch.ts';
import type { SendDeclarations } from '../../src/api/deps.ts';
import { parseApiTokens } from '../../src/api/index.ts';
import { apiHarness, readToken, sendToken, write } from '../support/apiHarness.ts';
import type { ApiHarness } from '../support/apiHarness.ts';
import { testKey } from '../support/history.ts';

// serve --max-bulk-declarations and --max-bytes-per-token-per-minute (docs/operations.md#configuration):
// past either, the answer names the limit with {limit, max, got}, like the rollout limits.

const otherSender = 'sender-token-2';

type Problem = { code: string; status: number; details?: { limit?: string; max?: number; got?: number } };

async function harness(writeLimits: { maxBulkDeclarations?: number; maxBytesPerTokenPerMinute?: number }) {
  let clock = 1_000;
  let sendMany: SendDeclarations = async () => ({ outcomes: [] });
  const { table } = parseApiTokens(`${readToken}:read;${sendToken}:read,send;${otherSender}:send`);
  const h = await apiHarness({ sendMany: (items) => sendMany(items), tokens: table, writeLimits, monotonicNow: () => clock });
  const sender = createBatchSender({ store: h.store, key: testKey, now: h.history.now });
  sendMany = (items) => sender.sendMany(items);
  return { h, advance: (ms: number) => (clock += ms) };
}

const items = (n: number, from = 0) => Array.from({ length: n }, (_, i) => ({ node: `n${from + i}`, resources: [] }));
const post = (h: ApiHarness, payload: unknown, headers: Record<string, string> = write) =>
  h.app.inject({ method: 'POST', url: '/v1/declarations', headers, payload: payload as object });

test('a bulk POST /v1/declarations over --max-bulk-declarations is 400 naming the limit, and records nothing', async () => {
  const { h } = await harness({ maxBulkDeclarations: 3 });
  try {
    assert.equal((await post(h, items(3))).statusCode, 202);
    const before = await h.store.headPosition();
    const r = await post(h, items(4, 10));
    assert.equal(r.statusCode, 400, r.body);
    const p = r.json() as Problem;
    assert.equal(p.code, 'CONVERGE_ERR_BAD_REQUEST');
    assert.deepEqual(p.details, { limit: 'max-bulk-declarations', max: 3, got: 4 });
    assert.match(r.body, /--max-bulk-declarations \(3\)/);
    assert.equal(await h.store.headPosition(), before);
  } finally {
    await h.close();
  }
});

test('the bulk limit can be raised past the former fixed 1,000', async () => {
  const { h } = await harness({ maxBulkDeclarations: 1_500 });
  try {
    const r = await post(h, items(1_200));
    assert.equal(r.statusCode, 202, r.body);
    assert.equal((r.json() as { sent: number }).sent, 1_200);
  } finally {
    await h.close();
  }
});

test('bodies past --max-bytes-per-token-per-minute are 429 with Retry-After naming the limit, until the bucket refills', async () => {
  const max = 3_000;
  const { h, advance } = await harness({ maxBytesPerTokenPerMinute: max });
  try {
    // About 1.2 KB a body: two fit in the minute's 3,000 bytes, a third does not.
    const body = items(40);
    const size = Buffer.byteLength(JSON.stringify(body));
    assert.ok(size * 2 < max && size * 3 > max, `test body of ${size} bytes fits twice, not three times, in ${max}`);
    assert.equal((await post(h, body)).statusCode, 202);
    assert.equal((await post(h, body)).statusCode, 202);
    const r = await post(h, body);
    assert.equal(r.statusCode, 429, r.body);
    const p = r.json() as Problem;
    assert.equal(p.code, 'CONVERGE_ERR_CLIENT_OVER_RATE');
    assert.equal(p.details?.limit, 'max-bytes-per-token-per-minute');
    assert.equal(p.details?.max, max);
    assert.equal(p.details?.got, size * 3);
    assert.match(r.body, /--max-bytes-per-token-per-minute \(3000\)/);
    const retryAfter = Number(r.headers['retry-after']);
    assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${r.headers['retry-after']}`);
    // Other routes of the same token that write are counted too; reads are not.
    assert.equal((await h.app.inject({ method: 'GET', url: '/v1/nodes', headers: write })).statusCode, 200);
    // After Retry-After on the monotonic clock, the same body is accepted.
    advance(retryAfter * 1000);
    assert.equal((await post(h, body)).statusCode, 202);
  } finally {
    await h.close();
  }
});

test('the byte rate is kept per token: one token over it does not refuse another', async () => {
  const max = 2_000;
  const { h } = await harness({ maxBytesPerTokenPerMinute: max });
  try {
    const body = items(40);
    assert.ok(Buffer.byteLength(JSON.stringify(body)) * 2 > max);
    assert.equal((await post(h, body)).statusCode, 202);
    assert.equal((await post(h, items(40, 100))).statusCode, 429);
    assert.equal((await post(h, items(40, 100), { authorization: `Bearer ${otherSender}` })).statusCode, 202);
  } finally {
    await h.close();
  }
});
