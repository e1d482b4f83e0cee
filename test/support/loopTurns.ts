// Which turn of the event loop it is, for tests that check work is spread over turns: a ticker
// that runs once in each turn's setImmediate phase. Counted, never timed.

export type LoopTurns = Readonly<{
  /** The turn now: one more in each turn of the loop since the count began. */
  now: () => number;
  /** Stop counting (resolves once the ticker has run its last). */
  stop: () => Promise<void>;
}>;

export function countLoopTurns(): LoopTurns {
  let turn = 0;
  let ticking = true;
  const ticker = (async () => {
    while (ticking) {
      turn++;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  })();
  return {
    now: () => turn,
    stop: async () => {
      ticking = false;
      await ticker;
    },
  };
}
