import { execFile } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { connect, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { promisify } from 'node:util';

// An engine "on a host of its own": a network namespace (`ip netns`, iproute2; root only) with
// three veth pairs to the root namespace, each a /30 of 10.213.<x>.0/24 (x chosen free at random):
// one to reach PostgreSQL, one to reach RabbitMQ (AMQP and management), one on which the engine's
// API listens for the test. PostgreSQL and RabbitMQ listen on loopback only, so for each link a TCP
// forwarder in this process listens on the link's root-side address and pipes to 127.0.0.1. A link
// is cut by a `blackhole` qdisc on both of its ends: every packet dropped, no RST, no ICMP — a
// partition, not a reset (netem and iptables are not in every kernel; blackhole is in this one).
// Everything is removed by `remove()`: the namespace (its veth pairs go with it) and the forwarders.

const run = promisify(execFile);
const ip = (...args: string[]): Promise<unknown> => run('ip', args);
const inNs = (ns: string, ...cmd: string[]): Promise<unknown> => run('ip', ['netns', 'exec', ns, ...cmd]);

/** Run `ip [options] -batch -` over these commands. */
function batch(options: readonly string[], commands: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = execFile('ip', [...options, '-batch', '-'], (err) => (err === null ? resolve() : reject(err)));
    child.stdin!.end(`${commands.join('\n')}\n`);
  });
}

export type Link = 'store' | 'broker';

export type EngineHost = Readonly<{
  /** The namespace's name (random suffix). */
  ns: string;
  /** Prefix a command with this to run it in the namespace. */
  exec: readonly string[];
  /** The namespace-side address the engine's API should listen on (reachable from the root namespace). */
  apiHost: string;
  /** `url` (naming 127.0.0.1:5432) rewritten to reach PostgreSQL from the namespace. */
  storeUrl: (url: string) => string;
  /** An amqp:// or management http:// URL (127.0.0.1) rewritten to reach RabbitMQ from the namespace. */
  brokerUrl: (url: string) => string;
  /** Drop every packet on these links, both directions. */
  cut: (links: readonly Link[]) => Promise<void>;
  /** Undo every cut. */
  heal: () => Promise<void>;
  remove: () => Promise<void>;
}>;

/** Why engines cannot be put in namespaces here, or null if they can (creates and removes a probe namespace). */
export async function netnsUnavailable(): Promise<string | null> {
  if (process.getuid?.() !== 0) return 'network namespaces need root (ip netns add)';
  const ns = `cvprobe-${randomBytes(3).toString('hex')}`;
  try {
    await ip('netns', 'add', ns);
  } catch (e) {
    return `ip netns add failed (is iproute2 installed? apt-get install -y iproute2): ${(e as Error).message.trim()}`;
  }
  try {
    await inNs(ns, 'tc', 'qdisc', 'add', 'dev', 'lo', 'root', 'blackhole');
    return null;
  } catch (e) {
    return `tc qdisc blackhole failed (tc is iproute2's; the kernel needs sch_blackhole): ${(e as Error).message.trim()}`;
  } finally {
    await ip('netns', 'del', ns).catch(() => undefined);
  }
}

/** A /24 of 10.213.0.0/16 no interface here has an address in, picked at random. */
async function freeSubnet(): Promise<number> {
  const { stdout } = (await run('ip', ['-4', '-o', 'addr'])) as { stdout: string };
  for (let i = 0; i < 50; i++) {
    const x = randomInt(0, 256);
    if (!stdout.includes(`10.213.${x}.`)) return x;
  }
  throw new Error('no free 10.213.x.0/24 for a test namespace');
}

type Forwarder = { server: Server; sockets: Set<Socket>; port: number };

/** Listen on host:0 and pipe every connection to 127.0.0.1:targetPort. */
async function forward(host: string, targetPort: number): Promise<Forwarder> {
  const sockets = new Set<Socket>();
  const server = createServer((down) => {
    const up = connect(targetPort, '127.0.0.1');
    for (const s of [down, up]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      // Either side gone: end the other (a reset stays a reset; a partition stays silent until then).
      s.on('error', () => (s === down ? up : down).destroy());
    }
    down.pipe(up);
    up.pipe(down);
    down.on('close', () => up.destroy());
    up.on('close', () => down.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  return { server, sockets, port: (server.address() as { port: number }).port };
}

/** `label`: a letter or two naming the engine in interface names (at most 15 characters in all). */
export async function createEngineHost(label: string): Promise<EngineHost> {
  const tag = randomBytes(3).toString('hex');
  const ns = `cv-${label}-${tag}`;
  const x = await freeSubnet();
  const net = (n: number): string => `10.213.${x}.${n}`;
  // Root side `cv<tag><label><s|b|a>`, namespace side `store0`, `broker0`, `api0`.
  const links = {
    store: { root: `cv${tag}${label}s`, inner: 'store0', base: 0 },
    broker: { root: `cv${tag}${label}b`, inner: 'broker0', base: 4 },
  };
  const api = { root: `cv${tag}${label}a`, inner: 'api0', base: 8 };
  const forwarders: Forwarder[] = [];
  const cuts: Link[] = [];
  await ip('netns', 'add', ns);
  const remove = async (): Promise<void> => {
    for (const f of forwarders) {
      for (const s of f.sockets) s.destroy();
      await new Promise<void>((resolve) => f.server.close(() => resolve()));
    }
    // Deleting the namespace deletes the veth ends in it, and with each its root-side peer.
    await ip('netns', 'del', ns).catch(() => undefined);
  };
  try {
    // Two `ip -batch` runs, not a process per command: each costs a second or more on a busy machine.
    const all = [links.store, links.broker, api];
    await batch(
      [],
      [
        ...all.map((l) => `link add ${l.root} type veth peer name ${l.inner} netns ${ns}`),
        ...all.map((l) => `addr add ${net(l.base + 1)}/30 dev ${l.root}`),
        ...all.map((l) => `link set ${l.root} up`),
      ],
    );
    await batch(
      ['-n', ns],
      ['link set lo up', ...all.map((l) => `addr add ${net(l.base + 2)}/30 dev ${l.inner}`), ...all.map((l) => `link set ${l.inner} up`)],
    );
    const pg = await forward(net(1), 5432);
    const amqp = await forward(net(5), 5672);
    const management = await forward(net(5), 15672);
    forwarders.push(pg, amqp, management);
    const rewrite = (url: string, to: Record<string, Forwarder>): string => {
      const u = new URL(url);
      const f = to[u.port];
      if (u.hostname !== '127.0.0.1' || f === undefined) throw new Error(`cannot reach ${u.host} from a namespace`);
      u.hostname = f === pg ? net(1) : net(5);
      u.port = String(f.port);
      return u.toString();
    };
    const blackhole = async (link: Link, on: boolean): Promise<void> => {
      const l = links[link];
      const verb = on ? 'add' : 'del';
      await run('tc', ['-n', ns, 'qdisc', verb, 'dev', l.inner, 'root', ...(on ? ['blackhole'] : [])]);
      await run('tc', ['qdisc', verb, 'dev', l.root, 'root', ...(on ? ['blackhole'] : [])]);
    };
    return {
      ns,
      exec: ['ip', 'netns', 'exec', ns],
      apiHost: net(10),
      storeUrl: (url) => rewrite(url, { '5432': pg }),
      brokerUrl: (url) => rewrite(url, { '5672': amqp, '15672': management }),
      cut: async (which) => {
        for (const link of which) {
          if (cuts.includes(link)) continue;
          await blackhole(link, true);
          cuts.push(link);
        }
      },
      heal: async () => {
        while (cuts.length > 0) await blackhole(cuts.pop()!, false);
      },
      remove,
    };
  } catch (e) {
    await remove();
    throw e;
  }
}
