import type { NodeState } from '../../projections/index.ts';
import type { ReadModel } from './readModel.ts';

// Wait for a node's state to satisfy a predicate, driven by the read model's change
// notifications (no polling): resolves with the state the moment a fold makes it true, or null
// at the timeout or when `signal` aborts (a client that hung up).

export function waitForNode(
  readModel: ReadModel,
  node: string,
  predicate: (s: NodeState) => boolean,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<NodeState | null> {
  const now = readModel.get(node);
  if (now !== undefined && predicate(now)) return Promise.resolve(now);
  if (timeoutMs <= 0 || signal?.aborted) return Promise.resolve(null);
  return new Promise((resolve) => {
    const finish = (s: NodeState | null): void => {
      clearTimeout(timer);
      unsubscribe();
      signal?.removeEventListener('abort', onAbort);
      resolve(s);
    };
    const onAbort = (): void => finish(null);
    const unsubscribe = readModel.onChange((c) => {
      if (c.node === node && predicate(c.state)) finish(c.state);
    });
    const timer = setTimeout(() => finish(null), timeoutMs);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
