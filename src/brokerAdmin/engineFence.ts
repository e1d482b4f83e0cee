import { sleep } from '../retry.ts';
import { adminError, createManagementClient, seg } from './managementClient.ts';
import type { ManagementClient } from './managementClient.ts';

// Fencing the relay at the broker (docs/operations.md "Fencing the relay"). An engine that takes
// the relay lease from a holder that did not give it up cannot know whether that holder issued a
// publish that is still on the wire: cut off from the store and the broker at once, the holder's
// frames land when its link comes back, unless the broker has closed its connection first. So the
// new holder closes every other engine's connection on the vhost through the management API and
// waits until the broker lists each as closed (or no longer lists it): a connection the broker has
// closed reads no more frames but its peer's close-ok (AMQP 0-9-1 connection.close), and a frame
// read before the close was routed before this engine publishes anything. The broker keeps listing
// a closed connection whose peer cannot answer (cut off) until it gives up waiting; its listed state
// follows within a statistics interval (5 s by default).
// Engines name their connection `converge-engine <instance>` (src/app/amqp.ts); an older release
// names it `converge-engine`, which the prefix matches too.

export const engineConnectionPrefix = 'converge-engine';

export type EngineFenceOptions = Readonly<{
  client: ManagementClient;
  vhost: string;
  /** This engine's own connection name, left open. */
  own: string;
  /** How long to wait for the broker to stop listing the closed connections (ms; default 10 s). */
  timeoutMs?: number;
  /** Poll interval while waiting (ms; default 100). */
  everyMs?: number;
}>;

type Listed = { name: string; state?: unknown; client_properties?: { connection_name?: unknown } };

/** The states in which a connection no longer reads frames (the management API's `state`). */
const closedStates: readonly unknown[] = ['closing', 'closed'];

const isOtherEngine = (c: Listed, own: string): boolean => {
  const n = c.client_properties?.connection_name;
  return typeof n === 'string' && n.startsWith(engineConnectionPrefix) && n !== own;
};

/** The other engines' connections the broker lists as open (not closing or closed). */
async function otherEngines(o: EngineFenceOptions): Promise<string[]> {
  const path = `/vhosts/${seg(o.vhost)}/connections`;
  const res = await o.client.request('GET', path);
  if (res.status !== 200 || !Array.isArray(res.body)) throw adminError('GET', path, res);
  return (res.body as Listed[]).filter((c) => isOtherEngine(c, o.own) && !closedStates.includes(c.state)).map((c) => c.name);
}

/**
 * Close every other engine's connection on the vhost and resolve with their broker-side names once
 * the broker lists none of them as open. Throws CONVERGE_ERR_BROKER_ADMIN when the API cannot do it.
 */
export async function closeOtherEngineConnections(o: EngineFenceOptions): Promise<string[]> {
  const closed = await otherEngines(o);
  for (const name of closed) {
    const path = `/connections/${seg(name)}`;
    const res = await o.client.request('DELETE', path, undefined, { 'x-reason': 'converge: relay lease taken over (fencing)' });
    if (res.status !== 204 && res.status !== 404) throw adminError('DELETE', path, res);
  }
  const deadline = performance.now() + (o.timeoutMs ?? 10_000);
  for (;;) {
    const left = (await otherEngines(o)).filter((n) => closed.includes(n));
    if (left.length === 0) return closed;
    if (performance.now() > deadline) {
      throw adminError('GET', `/vhosts/${seg(o.vhost)}/connections`, {
        status: 200,
        body: { reason: `still listed as open after closing: ${left.join(', ')}` },
      });
    }
    await sleep(o.everyMs ?? 100);
  }
}

/** The management client for a fence, from serve's --management-url. */
export const fenceClient = (managementUrl: string): ManagementClient => createManagementClient({ managementUrl, timeoutMs: 5_000 });
