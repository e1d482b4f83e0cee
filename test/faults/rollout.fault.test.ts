import { rollbackSigkill } from './rollbackSigkillScenario.ts';
import { rolloutSigkill } from './rolloutSigkillScenario.ts';
import { registerScenarioTests } from './scenarios.ts';

// A rollout survives the engine SIGKILLed under it (RELIABILITY.md): it completes, each
// node recorded and applied exactly one declaration from it, and its events agree with a replay.
// A rollback over RabbitMQ survives it too: every node is rolled back once and reports its restored digest.
registerScenarioTests('rollout fault scenario', [rolloutSigkill, rollbackSigkill]);
