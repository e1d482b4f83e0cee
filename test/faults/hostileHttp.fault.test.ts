import { hostileHttp } from './hostileHttpScenario.ts';
import { registerScenarioTests } from './scenarios.ts';

// Hostile HTTP clients against an engine ingesting over the real broker (RELIABILITY.md, issue
// 13 items 5 and 8): bodies without a valid token are never parsed, every hostile request is
// refused with its problem, and every confirmed report is still stored once.
registerScenarioTests('hostile HTTP scenario', [hostileHttp]);
