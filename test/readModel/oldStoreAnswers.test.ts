import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { computeAnswers } from '../fixtures/oldStore/answers.ts';
import type { Answers } from '../fixtures/oldStore/answers.ts';

// Old stores keep working (docs/design.md §3): a store written under the old liveness rule (an
// AliveSeen at most every 15 s) must give the answers the engine of that time gave over it. Those
// answers were made by that engine's own code, at commit b1417ad (test/fixtures/oldStore/answers.ts
// says how), and are compared here with this engine's, field by field. A field this engine added
// since (conditions, say) is not in the old answer and is not compared; every field that was is.

const old = JSON.parse(
  gunzipSync(readFileSync(new URL('../fixtures/oldStore/answers.b1417ad.json.gz', import.meta.url))).toString(),
) as Answers;

/** Paths where `now` differs from `then`, looking only at what `then` has. */
function differences(then: unknown, now: unknown, path: string, out: string[]): void {
  if (out.length > 20) return;
  if (then !== null && typeof then === 'object') {
    if (now === null || typeof now !== 'object' || Array.isArray(then) !== Array.isArray(now)) {
      out.push(`${path}: was ${JSON.stringify(then)}, is ${JSON.stringify(now)}`);
      return;
    }
    if (Array.isArray(then) && then.length !== (now as unknown[]).length) {
      out.push(`${path}: ${then.length} entries then, ${(now as unknown[]).length} now`);
      return;
    }
    for (const [k, v] of Object.entries(then)) differences(v, (now as Record<string, unknown>)[k], `${path}.${k}`, out);
    return;
  }
  if (then !== now) out.push(`${path}: was ${JSON.stringify(then)}, is ${JSON.stringify(now)}`);
}

test('the old engine’s answers over an AliveSeen store are what this engine answers (state --at, fleet --at, timelines)', async () => {
  const now = await computeAnswers();
  for (const section of ['states', 'fleet', 'timelines'] as const) {
    assert.deepEqual(Object.keys(now[section]), Object.keys(old[section]), `${section}: the same questions`);
    const out: string[] = [];
    differences(old[section], now[section], section, out);
    assert.deepEqual(out, [], `${section} differ from the old engine's`);
  }
});

test('the recorded answers cover the cases that matter: connected, disconnected, behind, converged, a stale report', () => {
  const text = JSON.stringify(old);
  for (const word of ['"connected"', '"disconnected"', '"behind"', '"converged"', '"degraded"', 'stale'])
    assert.ok(text.includes(word), `an answer says ${word}`);
  assert.equal(Object.keys(old.states).length, 870);
});
