import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { describeOnService, once } from './services.ts';
import type { Probe } from './services.ts';

// Several suites of one file share a service's probe (once per process). node:test files a test
// under the suite of the async context that registers it, and code after an await runs in the
// context of the promise awaited: each suite must get its own tests, not the first asker's.

const shared = once(async () => ({ ok: true }) as const);
const other: Probe = once(async () => ({ ok: true }) as const);

describe('a plain suite', () => {
  describeOnService('the service', shared, 'first asker', () => {
    test('files its test here', (t) => assert.equal(t.fullName, 'a plain suite > first asker > files its test here'));
  });
});

describeOnService('the service', shared, 'second asker', () => {
  test('files its test here', (t) => assert.equal(t.fullName, 'second asker > files its test here'));
});

describeOnService('another service', other, 'another service suite', () => {
  describeOnService('the service', shared, 'nested asker', () => {
    test('files its test here', (t) => assert.equal(t.fullName, 'another service suite > nested asker > files its test here'));
  });
});
