import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { nodePermissions } from '../../src/brokerAdmin/nodePermissions.ts';
import { seg } from '../../src/brokerAdmin/managementClient.ts';

// A 3-node RabbitMQ cluster of our own beside the system broker, through
// scripts/rabbitmq-cluster.sh: its nodes, their URLs, accounts made with rabbitmqctl (the cluster
// runs no management plugin unless asked, and then on ports of its own, so 15672 stays the system
// broker's), stopping one node for good, and removing everything. The script's watchdog removes
// the cluster if this process dies first.

const script = new URL('../../scripts/rabbitmq-cluster.sh', import.meta.url).pathname;
const run = promisify(execFile);

export type ClusterNode = Readonly<{
  index: number;
  name: string;
  port: number;
  /** The management API's port, with `management: true`; else null. */
  managementPort: number | null;
  /** The data folder of the node: its Erlang VM's pid is in `pid` there once it runs. */
  dir: string;
}>;

export type ClusterOptions = Readonly<{
  /** Nodes to start (default 3). */
  nodes?: number;
  /** Each node's open-file limit; above this process's hard limit it needs CAP_SYS_RESOURCE. */
  nofile?: number;
  /** Enable the management plugin, on a free port of each node's own. */
  management?: boolean;
  /** Each node's advanced.config, an Erlang term ending in a dot (default `[].`). */
  advanced?: string;
}>;

export type RabbitCluster = Readonly<{
  nodes: readonly ClusterNode[];
  /** `amqp://user:password@127.0.0.1:<port of node i>/` (default vhost). */
  urlOf: (index: number, user: string, password: string) => string;
  /** The node a URL points at (by its port), or null. */
  nodeOfUrl: (url: string) => ClusterNode | null;
  /** rabbitmqctl against node `index` (any running node: they share users, vhosts, queues). */
  ctl: (index: number, ...args: string[]) => Promise<string>;
  /** An account with full rights on the default vhost (the engine's). */
  addAdmin: (user: string, password: string) => Promise<void>;
  /** A node's account with exactly the rights `src/brokerAdmin` gives it (user_id = node id). */
  addNodeAccount: (node: string, password: string) => Promise<void>;
  /** Stop node `index` for good: `rabbitmqctl stop`, or SIGKILL of its VM. Resolves once the VM has exited. */
  stopNode: (index: number, how: 'stop' | 'kill') => Promise<void>;
  remove: () => Promise<void>;
}>;

/** Why a cluster cannot be started on this machine, or null if it may be tried. */
export function clusterUnavailable(): string | null {
  if (process.platform !== 'linux') return `needs Linux, this is ${process.platform}`;
  const bin = process.env['RABBITMQ_BIN_DIR'] ?? '/usr/lib/rabbitmq/bin';
  if (!existsSync(join(bin, 'rabbitmq-server'))) return `no RabbitMQ server at ${bin} (install the rabbitmq-server package)`;
  return null;
}

export async function startRabbitCluster(options: ClusterOptions = {}): Promise<RabbitCluster> {
  const why = clusterUnavailable();
  if (why !== null) throw new Error(`cannot start a RabbitMQ cluster: ${why}`);
  const dir = mkdtempSync(join(tmpdir(), 'converge-rmq-cluster-'));
  let stdout: string;
  try {
    const extra = [
      ...(options.nofile === undefined ? [] : ['--nofile', String(options.nofile)]),
      ...(options.management === true ? ['--management'] : []),
      ...(options.advanced === undefined ? [] : ['--advanced', options.advanced]),
    ];
    ({ stdout } = await run(script, ['start', dir, String(options.nodes ?? 3), '--owner-pid', String(process.pid), ...extra], {
      timeout: 180_000,
    }));
  } catch (e) {
    const detail = (e as { stderr?: string }).stderr?.trim() || (e as Error).message;
    await run(script, ['stop', dir]).catch(() => rmSync(dir, { recursive: true, force: true }));
    throw new Error(`cannot start a RabbitMQ cluster: ${detail}`, { cause: e });
  }
  const nodes = stdout
    .trim()
    .split('\n')
    .map((line): ClusterNode => {
      const [index, name, port, management] = line.split(' ');
      const managementPort = management === undefined ? null : Number(management);
      return { index: Number(index), name: name!, port: Number(port), managementPort, dir: join(dir, `n${index}`) };
    });
  const node = (index: number): ClusterNode => {
    const n = nodes.find((x) => x.index === index);
    if (n === undefined) throw new Error(`no node ${index} in the cluster`);
    return n;
  };
  const ctl = async (index: number, ...args: string[]): Promise<string> => {
    node(index);
    return (await run(script, ['ctl', dir, String(index), '-q', ...args], { timeout: 60_000 })).stdout;
  };
  /** Account changes go to a node that is still up. */
  const anyUp = async (): Promise<number> => {
    for (const n of nodes) if (!stopped.has(n.index)) return n.index;
    throw new Error('every node of the cluster is stopped');
  };
  const stopped = new Set<number>();
  let removed = false;
  return {
    nodes,
    urlOf: (index, user, password) => `amqp://${seg(user)}:${seg(password)}@127.0.0.1:${node(index).port}/`,
    nodeOfUrl: (url) => {
      const port = Number(new URL(url).port);
      return nodes.find((n) => n.port === port) ?? null;
    },
    ctl,
    addAdmin: async (user, password) => {
      const i = await anyUp();
      await ctl(i, 'add_user', user, password);
      await ctl(i, 'set_permissions', '-p', '/', user, '.*', '.*', '.*');
    },
    addNodeAccount: async (id, password) => {
      const i = await anyUp();
      const p = nodePermissions(id);
      await ctl(i, 'add_user', id, password);
      await ctl(i, 'set_permissions', '-p', '/', id, p.vhost.configure, p.vhost.write, p.vhost.read);
      await ctl(i, 'set_topic_permissions', '-p', '/', id, p.topic.exchange, p.topic.write, p.topic.read);
    },
    stopNode: async (index, how) => {
      node(index);
      await run(script, ['stop-node', dir, String(index), ...(how === 'kill' ? ['--kill'] : [])], { timeout: 60_000 });
      stopped.add(index);
    },
    remove: async () => {
      if (removed) return;
      removed = true;
      await run(script, ['stop', dir], { timeout: 60_000 }).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
