import { closeAllConnections, proxyBlackhole, proxyReset, registerScenarioTests } from './scenarios.ts';

// Engine ↔ broker connection faults under load (RELIABILITY.md): TCP reset, a blackhole noticed
// only through heartbeats, and the broker closing every connection.
registerScenarioTests('connection fault scenarios', [proxyReset, proxyBlackhole, closeAllConnections]);
