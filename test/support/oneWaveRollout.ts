import type { StartRolloutInput } from '../../src/engine/rolloutCommands.ts';

/**
 * The rollout most tests start: `web` (nginx:1.27) to `nodes` in a single wave that any failure
 * halts. As POST /v1/rollouts takes it; add `startedBy` for startRollout.
 */
export function oneWaveRollout(
  rollout: string,
  nodes: readonly string[],
  waveTimeoutMs: number,
): Omit<StartRolloutInput, 'startedBy'> & { rollout: string } {
  return {
    rollout,
    resources: [{ id: 'web', image: 'nginx:1.27' }],
    selection: { kind: 'nodes', nodes },
    waves: '100%',
    maxFailures: '0',
    waveTimeoutMs,
  };
}
