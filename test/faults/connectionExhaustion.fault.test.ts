import { connectionExhaustion } from './connectionExhaustionScenario.ts';
import { registerScenarioTests } from './scenarios.ts';

// Connection exhaustion against an engine ingesting over the real broker (RELIABILITY.md
// item 4): one token holds no more than its cap, refusals are problems with Retry-After, another
// token gets in, the probes answer (the admin listener's while the main one's sockets are
// exhausted), silent sockets are closed, and every confirmed report is still stored once.
registerScenarioTests('connection exhaustion scenario', [connectionExhaustion]);
