import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { signCheckpoint } from '../../../src/core/audit/checkpoint.ts';
import {
  checkLoggedCheckpoints,
  checkWitness,
  parseWitnessJson,
  witnessFileName,
  witnessJson,
} from '../../../src/core/audit/checkpointCheck.ts';
import { createTreeBuilder, leafHash } from '../../../src/core/audit/merkle.ts';

// The checkpoints against the recomputed tree (docs/audit.md#checkpoints-and-witnesses): the
// log's own, by kind, and a witness's, whose contradiction does not depend on whose key signed.

const at = '2026-01-01T00:00:00.000Z';
const keyA = generateKeyPairSync('ed25519');
const keyB = generateKeyPairSync('ed25519');

/** The roots of a log of `n` leaves ("e0", "e1", …) at every size. */
function rootsOf(leaves: readonly string[]): Map<number, string> {
  const t = createTreeBuilder();
  const roots = new Map([[0, t.root().toString('hex')]]);
  for (const l of leaves) {
    t.appendLeafHash(leafHash(Buffer.from(l)));
    roots.set(t.size, t.root().toString('hex'));
  }
  return roots;
}
const log = Array.from({ length: 20 }, (_, i) => `e${i}`);
const tree = { size: log.length, roots: rootsOf(log) };
const signedAt = (size: number, key = keyA.privateKey, roots = tree.roots) => signCheckpoint({ size, root: roots.get(size)!, at }, key);

test('the log checkpoints of its own tree, signed by the audit key, pass; without a key only the roots are checked', () => {
  const cps = [5, 12, 20].map((size, i) => ({ position: BigInt(size + i + 1), signed: signedAt(size) }));
  assert.deepEqual(checkLoggedCheckpoints(cps, tree, keyA.publicKey), { checked: 3, finding: null });
  assert.deepEqual(checkLoggedCheckpoints(cps, tree, null), { checked: 3, finding: null });
});

test('a forged signature, another key, a changed root and a size past the log are each found, by kind', () => {
  const good = signedAt(5);
  const forged = { ...good, signature: Buffer.alloc(64, 7).toString('base64') };
  const otherKey = signedAt(5, keyB.privateKey);
  const wrongRoot = signCheckpoint({ size: 5, root: tree.roots.get(6)!, at }, keyA.privateKey);
  const beyond = signCheckpoint({ size: 21, root: 'a'.repeat(64), at }, keyA.privateKey);
  const kindOf = (signed: typeof good, key = keyA.publicKey) =>
    checkLoggedCheckpoints(
      [
        { position: 1n, signed: good },
        { position: 9n, signed },
      ],
      tree,
      key,
    ).finding;
  assert.deepEqual(
    [forged, otherKey, wrongRoot, beyond].map((s) => [kindOf(s)?.kind, kindOf(s)?.position]),
    [
      ['signature', 9n],
      ['key', 9n],
      ['root', 9n],
      ['beyond', 9n],
    ],
  );
  // Without the key the forged signature is not seen: only the key can tell it.
  assert.equal(kindOf(forged, null as never), null);
  assert.equal(kindOf(wrongRoot, null as never)?.kind, 'root');
});

test('a witness checkpoint the rewritten log does not reproduce is found, even when the log was signed again with another key', () => {
  const witnessed = [5, 12].map((size) => ({ name: witnessFileName(signedAt(size)), signed: signedAt(size) }));
  const rewritten = [...log];
  rewritten[8] = 'forged';
  const rewrittenTree = { size: rewritten.length, roots: rootsOf(rewritten) };
  // The log's own checkpoints, re-signed by the attacker's key, agree with the rewritten log.
  const resigned = [5, 12, 20].map((size) => ({ position: BigInt(size), signed: signedAt(size, keyB.privateKey, rewrittenTree.roots) }));
  assert.equal(checkLoggedCheckpoints(resigned, rewrittenTree, keyB.publicKey).finding, null);

  assert.deepEqual(checkWitness(witnessed, tree, keyA.publicKey), { checked: 2, finding: null });
  const r = checkWitness(witnessed, rewrittenTree, keyB.publicKey);
  assert.equal(r.checked, 1, 'size 5 precedes the change');
  assert.deepEqual([r.finding?.kind, r.finding?.size, r.finding?.signatureValid], ['root', 12, false]);
  assert.equal(checkWitness(witnessed, rewrittenTree, null).finding?.signatureValid, null);
  // A truncated log: the witness signed more than it holds.
  const short = { size: 10, roots: rootsOf(log.slice(0, 10)) };
  assert.deepEqual([checkWitness(witnessed, short, null).finding?.kind], ['beyond']);
});

test("a witness's JSON reads back as the checkpoint it was written from, and nothing else reads as one", () => {
  const s = signedAt(12);
  assert.deepEqual(parseWitnessJson(witnessJson(s)), s);
  assert.match(witnessFileName(s), /^checkpoint-0000000000000012-[0-9a-f]{16}-[0-9a-f]{16}\.json$/);
  assert.match(String(parseWitnessJson('{')), /not JSON/);
  assert.match(String(parseWitnessJson('{"checkpoint":{"size":"1"},"signature":"x"}')), /not \{size/);
  const badAt = JSON.stringify({ checkpoint: { ...s.checkpoint, at: '2026-01-01' }, signature: s.signature });
  assert.match(String(parseWitnessJson(badAt)), /toISOString/);
});
