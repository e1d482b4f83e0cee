import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

// One way to say "this suite needs a service" (RabbitMQ, PostgreSQL, …): the suite runs when the
// service answers; otherwise it is one failing test under CONVERGE_REQUIRE_BROKER=1 (CI sets it, and
// so does everyone before landing) and one loudly skipped test without it. A skipped
// suite must never look like a passing one.

export type Probe = () => Promise<{ ok: true } | { ok: false; reason: string }>;

export const servicesRequired = (): boolean => process.env['CONVERGE_REQUIRE_BROKER'] === '1';

/** `describe(name, body)` when `probe` says `service` is reachable; see above for when it is not. */
export function describeOnService(service: string, probe: Probe, name: string, body: () => void | Promise<void>): void {
  void describe(name, async () => {
    const p = await probe();
    if (p.ok) return body();
    if (servicesRequired()) {
      test(`${name} needs ${service} (CONVERGE_REQUIRE_BROKER=1)`, () => assert.fail(`${service} unreachable: ${p.reason}`));
    } else {
      console.warn(`\n*** SKIPPING ${name}: ${service} unreachable (${p.reason}); set CONVERGE_REQUIRE_BROKER=1 to fail instead ***\n`);
      test(`${name} — SKIPPED: ${service} unreachable: ${p.reason}`, { skip: p.reason }, () => {});
    }
  });
}

/**
 * Probe once per process, however many suites ask. Each asker gets a promise made in its own
 * async context: node:test files what a suite registers after `await` under the context of the
 * promise awaited, so one shared promise would file every later suite's tests under the first
 * asker's (and fail them once that suite has finished).
 */
export function once(probe: Probe): Probe {
  let answer: ReturnType<Probe> | undefined;
  return () =>
    new Promise((resolve, reject) => {
      (answer ??= probe()).then(resolve, reject);
    });
}

/**
 * `tryOnce` up to `attempts` times, until one answers ok: a loaded machine can hold one attempt
 * past its bound, while a service that is down fails them all (the last reason is kept).
 */
export async function probeWithRetries(attempts: number, tryOnce: Probe): ReturnType<Probe> {
  let last: Awaited<ReturnType<Probe>> = { ok: false, reason: 'not tried' };
  for (let i = 0; i < Math.max(1, attempts); i++) {
    last = await tryOnce();
    if (last.ok) return last;
  }
  return last;
}
