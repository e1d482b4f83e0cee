import type { NodeState } from '../../projections/index.ts';
import type { ReadModel } from './readModel.ts';
import { attr, eventKey, tracer } from '../tracing/index.ts';

// Wait for a node's state to satisfy a predicate, driven by the read model's change
// notifications (no polling): resolves with the state the moment a fold makes it true, or null
// at the timeout, when `signal` aborts (a client that hung up), or when the read model stops on
// a failed fold (nothing more will be folded). A predicate that throws counts as false.

export function waitForNode(
  readModel: ReadModel,
  node: string,
  predicate: (s: NodeState) => boolean,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<NodeState | null> {
  const holds = (s: NodeState): boolean => {
    try {
      return predicate(s);
    } catch {
      return false;
    }
  };
  const now = readModel.get(node);
  if (now !== undefined && holds(now)) return Promise.resolve(now);
  if (timeoutMs <= 0 || signal?.aborted || readModel.failure() !== null) return Promise.resolve(null);
  return new Promise((resolve) => {
    const finish = (s: NodeState | null): void => {
      clearTimeout(timer);
      unsubscribe();
      unsubscribeFailure();
      signal?.removeEventListener('abort', onAbort);
      resolve(s);
    };
    const onAbort = (): void => finish(null);
    const unsubscribe = readModel.onChange((c) => {
      if (c.node !== node || !holds(c.state)) return;
      // The wake-up, a span of the report's trace when ingest traced the event that woke it.
      const t = tracer();
      if (t.enabled)
        t.start('converge.await.wake', { parent: eventKey(c.event.id), childOnly: true, attributes: { [attr.node]: node } }).end();
      finish(c.state);
    });
    const unsubscribeFailure = readModel.onFailure(() => finish(null));
    const timer = setTimeout(() => finish(null), timeoutMs);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Read-your-writes for a send (POST declarations): true once the read model shows the node's
 * send `serial` (or a later one), false at the timeout or if the projection has stopped. Never
 * throws: the declaration is recorded whatever the read model does.
 */
export const waitForSend = async (readModel: ReadModel, node: string, serial: number, timeoutMs: number): Promise<boolean> =>
  (await waitForNode(readModel, node, (s) => (s.sent?.serial ?? 0) >= serial, timeoutMs)) !== null;
