import { hostileOverBroker, registerScenarioTests } from './scenarios.ts';

// Hostile input over the real broker (RELIABILITY.md): nothing hostile becomes an event, all of
// it is dead-lettered with a code, and the valid load beside it is stored exactly once.
registerScenarioTests('hostile input scenario', [hostileOverBroker]);
