import { registerScenarioTests } from './scenarios.ts';
import { tampering } from './tamperingScenario.ts';

// Signature tampering over the real broker (RELIABILITY.md): a flipped bit anywhere in the
// declaration or its signature, a re-encoded declaration, a wrong key — the node refuses each
// whole and the engine records the refusal with the state it implies (unknown, or refused).
// CONVERGE_FAULT_SEED replays the bit positions; CONVERGE_FAULT_TAMPER_RUNS tries more.
registerScenarioTests('tampering scenario', [tampering]);
