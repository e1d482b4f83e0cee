import { hostileNodeFlood } from './floodScenario.ts';
import { registerScenarioTests } from './scenarios.ts';

// One enrolled node floods at full speed beside steady ones (RELIABILITY.md): its excess
// is shed to mesh.dead by its budget, bodies wider than a declaration are refused with a code,
// and the steady nodes' reports are all stored exactly once.
registerScenarioTests('hostile node flood scenario', [hostileNodeFlood]);
