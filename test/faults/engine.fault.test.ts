import { baseline, diskFull, engineSigkill, registerScenarioTests, storeUnavailable } from './scenarios.ts';

// The engine and its store failing under load (RELIABILITY.md): SIGKILL and restart, appends
// failing or losing their reply, a real full disk.
registerScenarioTests('engine fault scenarios', [baseline, engineSigkill, storeUnavailable, diskFull]);
