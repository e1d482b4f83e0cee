import { randomBytes } from 'node:crypto';
import { ConvergeError } from '../core/errors.ts';
import { adminError, createManagementClient, seg } from './managementClient.ts';
import type { ManagementClient, ManagementOptions } from './managementClient.ts';
import { validateNodeId } from '../core/wire/nodeId.ts';
import { nodePermissions } from './nodePermissions.ts';
import { declareNodeInbox } from './nodeInbox.ts';
import type { InboxOutcome } from './nodeInbox.ts';
import type { InboxKind } from '../transport/topology.ts';
import type { TopicPermissions, VhostPermissions } from './nodePermissions.ts';

export type NodeAccountOptions = ManagementOptions &
  Readonly<{
    /** Virtual host of the mesh topology; default `/`. */
    vhost?: string;
    /**
     * Enrolling an id that already has an account is refused unless this is set; then the
     * password is replaced (rotation) and the permissions rewritten. Never for an account with
     * tags (an operator or the engine), whatever this says.
     */
    replace?: boolean;
    /** The form of the node's inbox, declared before the account is made (default classic); false: no inbox. */
    inbox?: InboxKind | false;
  }>;

export type Enrolled = Readonly<{
  node: string;
  vhost: string;
  /** Returned once and stored nowhere by Converge: print it to the operator and forget it. */
  password: string;
  permissions: VhostPermissions;
  topicPermissions: TopicPermissions;
  replaced: boolean;
  /** The node's inbox as enroll left it (null when asked not to declare it). */
  inbox: InboxOutcome | null;
}>;

export type Revoked = Readonly<{ node: string; existed: boolean; connectionsClosed: number }>;

/** 32 random bytes, base64url: 256 bits, and no character that needs quoting in a URL or shell. */
const generatePassword = (): string => randomBytes(32).toString('base64url');

type User = Readonly<{ name: string; tags: readonly string[] }>;

async function getUser(client: ManagementClient, id: string): Promise<User | null> {
  const path = `/users/${seg(id)}`;
  const res = await client.request('GET', path);
  if (res.status === 404) return null;
  if (res.status !== 200) throw adminError('GET', path, res);
  const body = res.body as { name?: unknown; tags?: unknown };
  // 3.10 returns tags as an array; older brokers as a comma-separated string.
  const tags = Array.isArray(body.tags) ? body.tags.map(String) : typeof body.tags === 'string' && body.tags ? body.tags.split(',') : [];
  return { name: String(body.name), tags };
}

async function put(client: ManagementClient, path: string, body: unknown, ok: readonly number[] = [201, 204]): Promise<void> {
  const res = await client.request('PUT', path, body);
  if (!ok.includes(res.status)) throw adminError('PUT', path, res);
}

async function deleteUser(client: ManagementClient, id: string): Promise<boolean> {
  const path = `/users/${seg(id)}`;
  const res = await client.request('DELETE', path);
  if (res.status === 404) return false;
  if (res.status !== 204) throw adminError('DELETE', path, res);
  return true;
}

/**
 * Create a node's broker account: user = node id (docs/design.md §1: nodes publish with user_id = their
 * broker user = their node id), a generated password, and permissions that let it say only what
 * wire.go says it may (see nodePermissions.ts).
 */
export async function enrollNode(id: string, options: NodeAccountOptions): Promise<Enrolled> {
  validateNodeId(id);
  const vhost = options.vhost ?? '/';
  const client = createManagementClient(options);
  const existing = await getUser(client, id);
  if (existing && existing.tags.length > 0) {
    // Rotating an administrator's password through a node command would lock operators out.
    throw new ConvergeError(
      'CONVERGE_ERR_NODE_EXISTS',
      `broker user ${id} exists with tags [${existing.tags.join(', ')}]; it is not a node account`,
    );
  }
  if (existing && options.replace !== true) {
    throw new ConvergeError(
      'CONVERGE_ERR_NODE_EXISTS',
      `node ${id} already has a broker account; revoke it, or enroll it again with replace to rotate its password`,
      // The CLI names its own flag for this (`--replace`); the tagged account above cannot be replaced at all.
      { details: { node: id, replaceable: true } },
    );
  }
  const vhostPath = `/vhosts/${seg(vhost)}`;
  const vh = await client.request('GET', vhostPath);
  if (vh.status === 404)
    throw new ConvergeError('CONVERGE_ERR_BROKER_ADMIN', `vhost ${vhost} does not exist on the broker`, { details: { vhost } });
  if (vh.status !== 200) throw adminError('GET', vhostPath, vh);

  // The inbox first: if it cannot be declared nothing else has changed, and the password — shown
  // once — is never made for an enroll that then fails.
  const inbox = options.inbox === false ? null : await declareNodeInbox(client, vhost, id, options.inbox ?? 'classic');
  const { vhost: permissions, topic } = nodePermissions(id);
  const password = generatePassword();
  // A new user has no rights in any vhost until the permissions below are written, so no moment
  // exists where it can do more than a node may; on any failure a newly created user is deleted.
  await put(client, `/users/${seg(id)}`, { password, tags: '' });
  try {
    await put(client, `/permissions/${seg(vhost)}/${seg(id)}`, permissions);
    await put(client, `/topic-permissions/${seg(vhost)}/${seg(id)}`, topic);
  } catch (e) {
    if (!existing) await deleteUser(client, id).catch(() => undefined);
    throw e;
  }
  return { node: id, vhost, password, permissions, topicPermissions: topic, replaced: existing !== null, inbox };
}

/**
 * Delete a node's broker account and close its open connections. RabbitMQ 3.10 closes a deleted
 * user's connections itself (CONNECTION_FORCED, verified in test/brokerAdmin); the sweep afterwards
 * closes any it did not (another cluster node lagging, a login racing the delete) and is what
 * makes revocation not depend on that broker behaviour. Idempotent: an unknown node reports
 * existed=false.
 */
export async function revokeNode(id: string, options: Omit<NodeAccountOptions, 'replace'>): Promise<Revoked> {
  validateNodeId(id);
  const client = createManagementClient(options);
  const user = await getUser(client, id);
  if (user && user.tags.length > 0) {
    throw new ConvergeError(
      'CONVERGE_ERR_NODE_EXISTS',
      `broker user ${id} has tags [${user.tags.join(', ')}]; it is not a node account, refusing to delete it`,
    );
  }
  const existed = user ? await deleteUser(client, id) : false;
  const connectionsClosed = await closeConnectionsOf(client, id);
  return { node: id, existed, connectionsClosed };
}

async function closeConnectionsOf(client: ManagementClient, user: string): Promise<number> {
  const path = `/connections?columns=name,user`;
  const res = await client.request('GET', path);
  if (res.status !== 200) throw adminError('GET', path, res);
  const conns = Array.isArray(res.body) ? (res.body as { name?: unknown; user?: unknown }[]) : [];
  let closed = 0;
  for (const c of conns) {
    if (c.user !== user || typeof c.name !== 'string') continue;
    const del = `/connections/${seg(c.name)}`;
    const r = await client.request('DELETE', del, undefined, { 'x-reason': 'node account revoked' });
    // 404: it closed on its own meanwhile, which is the outcome we wanted.
    if (r.status !== 204 && r.status !== 404) throw adminError('DELETE', del, r);
    if (r.status === 204) closed++;
  }
  return closed;
}
