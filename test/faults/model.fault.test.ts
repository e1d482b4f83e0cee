import { modelBased } from './modelScenario.ts';
import { registerScenarioTests } from './scenarios.ts';

// Model-based test of the whole engine over the real broker (RELIABILITY.md): random sequences
// of sends, reports (matching, stale, unknown, undeclared), duplicate deliveries, alive, crashes,
// restarts and replays; node states must equal a simple model after every command.
// CONVERGE_FAULT_SEED replays a run; CONVERGE_FAULT_MODEL_RUNS runs more; CONVERGE_FAULT_SHRINK=1 shrinks a failure.
registerScenarioTests('model-based test', [modelBased]);
