import { registerScenarioTests } from './scenarios.ts';
import { stuckIngestHealth } from './stuckIngestScenario.ts';

// A full disk under `serve`, read through its probes and metrics (RELIABILITY.md):
// not ready while ingest holds deliveries it cannot append, alive all along, ready again after.
registerScenarioTests('stuck ingest health scenario', [stuckIngestHealth]);
