import type { ConfigKey } from '../../app/settings.ts';
import type { CommandSpec } from '../command.ts';

// Every command's metadata, and the module that runs it (DESIGN §7). Imported by `--help`, so
// nothing here may import more than types: each command's code is loaded by `load` when it runs.

/** What the engine reads (serve adds the management API and the bound on mesh.dead). */
const engineSettings: readonly ConfigKey[] = [
  'store',
  'amqpUrl',
  'host',
  'port',
  'signingKeyPath',
  'apiTokens',
  'graceMs',
  'snapshotPath',
  'snapshotEvery',
  'logLevel',
  'trustMissingUserId',
  'aliveResolutionMs',
  'nodeReportRate',
  'nodeReportBurst',
];

export const commands: readonly CommandSpec[] = [
  {
    name: 'serve',
    usage: 'converge serve [--store <url>] [--amqp <url>] [--port <n>] [--signing-key <pem>] [--api-tokens <list>]',
    summary: 'the engine: ingest, relay, projections and the HTTP API',
    flags: {},
    args: [0, 0],
    // serve also bounds mesh.dead through the management API (issue 13 item 7).
    settings: [...engineSettings, 'deadLetterMaxLength', 'deadLetterMaxBytes', 'managementUrl'],
    defaultLogLevel: 'info',
    load: () => import('./serve.ts'),
  },
  {
    name: 'demo',
    usage: 'converge demo [--nodes 50] [--rounds <n>] [--duration <ms>] [--interval-ms 3000] [--port 8080] [--amqp <url>] [--json]',
    summary: 'a simulated fleet on embedded defaults, the race reproduced, the API served, a live summary',
    flags: {
      nodes: { type: 'string', value: '<n>', help: 'simulated nodes (at least 5; default 50)' },
      rounds: { type: 'string', value: '<n>', help: 'stop after this many rounds of declarations (default: until Ctrl-C)' },
      duration: { type: 'string', value: '<ms>', help: 'stop after this long' },
      'interval-ms': { type: 'string', value: '<ms>', help: 'time between rounds (default 3000)' },
    },
    args: [0, 0],
    settings: engineSettings,
    defaultLogLevel: 'warn',
    load: () => import('./demo.ts'),
  },
  {
    name: 'keygen',
    usage: 'converge keygen [--out <path>] [--json]',
    summary: 'generate an Ed25519 signing key; prints its key id and public key',
    flags: {
      out: {
        type: 'string',
        value: '<path>',
        help: 'write the private key here (mode 0600, never over an existing file); without it the private key goes to stdout',
      },
    },
    args: [0, 0],
    settings: [],
    load: () => import('./keygen.ts'),
  },
  {
    name: 'send',
    usage: 'converge send <node> <spec.json|-> [--json]',
    summary: 'sign and record a declaration for a node; prints its digest',
    flags: {},
    args: [2, 2],
    settings: ['store', 'signingKeyPath'],
    load: () => import('./send.ts'),
  },
  {
    name: 'status',
    usage: 'converge status [node] [--status <s>] [--liveness <l>] [--json]',
    summary: 'node states folded from the store (all nodes, or one)',
    flags: {
      status: { type: 'string', value: '<s>', help: 'only nodes with this status: undeclared, behind, refused, degraded, converged' },
      liveness: { type: 'string', value: '<l>', help: 'only nodes with this liveness: connected, disconnected, never-seen' },
    },
    args: [0, 1],
    settings: ['store', 'graceMs'],
    load: () => import('./status.ts'),
  },
  {
    name: 'history',
    usage: 'converge history <node> [--limit <n>] [--json]',
    summary: "a node's events, oldest first, each report classified, each declaration's latency",
    flags: { limit: { type: 'string', value: '<n>', help: 'only the latest n events, and the declarations they name' } },
    args: [1, 1],
    settings: ['store'],
    load: () => import('./history.ts'),
  },
  {
    name: 'state',
    usage: 'converge state <node> --at <ISO time|position> [--json]',
    summary: "a node's state as of a time or store position (the same fold, stopped)",
    flags: { at: { type: 'string', value: '<ISO time|position>', help: 'the moment: an ISO 8601 time or a store position' } },
    args: [1, 1],
    settings: ['store', 'graceMs'],
    load: () => import('./state.ts'),
  },
  {
    name: 'forensics',
    usage: 'converge forensics races [--node <id>] [--json]',
    summary: 'reports the old clock rule counted as caught up and the digest rule does not',
    flags: { node: { type: 'string', value: '<id>', help: 'only this node (reads its stream alone)' } },
    args: [1, 1],
    settings: ['store'],
    load: () => import('./forensics.ts'),
  },
  {
    name: 'replay',
    usage: 'converge replay --verify [--snapshot <path>] [--json]',
    summary: 'fold the whole store from zero and compare with the snapshot or the live fold, node by node',
    flags: { verify: { type: 'boolean', help: 'compare, and exit 1 on any difference (required: replay only ever reads)' } },
    args: [0, 0],
    settings: ['store', 'snapshotPath', 'logLevel'],
    defaultLogLevel: 'warn',
    load: () => import('./replay.ts'),
  },
  {
    name: 'node',
    usage: 'converge node enroll <id> [--vhost <vhost>] [--replace] [--json]\n       converge node revoke <id> [--vhost <vhost>] [--json]',
    summary: "a node's broker account: enroll <id> | revoke <id>, scoped to what wire.go lets it say",
    flags: {
      vhost: { type: 'string', value: '<vhost>', help: 'RabbitMQ virtual host (default /)' },
      replace: { type: 'boolean', help: 'enroll over an existing account, rotating its password' },
    },
    args: [2, 2],
    settings: ['managementUrl'],
    load: () => import('./node.ts'),
  },
];
