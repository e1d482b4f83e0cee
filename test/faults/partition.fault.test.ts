import { describeOnService, once } from '../support/services.ts';
import { netnsUnavailable } from '../support/netns.ts';
import { describeOnPostgres } from '../support/postgres.ts';
import { partitionScenarios } from './partitionScenario.ts';
import { registerScenarioTests } from './scenarios.ts';

// RELIABILITY.md rows "engine partitioned from …": two serve on one PostgreSQL store, each in a
// network namespace of its own; the active one cut from PostgreSQL, RabbitMQ or both, then healed.
// Needs root for `ip netns` (CI runs as root; elsewhere it skips loudly, or fails under
// CONVERGE_REQUIRE_BROKER=1), RabbitMQ, PostgreSQL and the built CLI (npm test builds first).

const namespaces = once(async () => {
  const reason = await netnsUnavailable();
  return reason === null ? { ok: true } : { ok: false, reason };
});

describeOnService('network namespaces', namespaces, 'engines partitioned', () => {
  describeOnPostgres('engines partitioned on a PostgreSQL store', () => {
    registerScenarioTests('partition scenarios', partitionScenarios);
  });
});
