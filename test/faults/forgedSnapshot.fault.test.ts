import { forgedSnapshot } from './forgedSnapshotScenario.ts';
import { registerScenarioTests } from './scenarios.ts';

// A forged read-model snapshot under `serve` (RELIABILITY.md): resealed forged
// values, wrong types, a changed byte, a cut file — each refused for its reason, a fold from zero
// served instead, and the honest snapshot written after restored.
registerScenarioTests('forged snapshot scenario', [forgedSnapshot]);
