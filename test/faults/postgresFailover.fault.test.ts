import { describeOnPostgres } from '../support/postgres.ts';
import { postgresFault } from './postgresFailoverScenario.ts';
import { registerScenarioTests } from './scenarios.ts';

// RELIABILITY.md rows "PostgreSQL restart, one engine / two engines" and "PostgreSQL failover to a
// synchronous standby, two engines": clusters of the scenario's own (initdb, pg_ctl, pg_basebackup
// on free loopback ports; the shared server is never touched), stopped with `-m immediate` under
// load and started again, or the primary stopped for good and its synchronous standby promoted.
// Needs RabbitMQ, the PostgreSQL server binaries and the built CLI (npm test builds first).

describeOnPostgres('PostgreSQL restarted or failed over', () => {
  registerScenarioTests('PostgreSQL restart and failover scenarios', [
    postgresFault('restart', 1),
    postgresFault('restart', 2),
    postgresFault('promote', 2),
  ]);
});
