// The configuration settings (docs/design.md §6, §7) as plain data: each one's flag, its variable, the
// value it takes and a line of help. No zod here, so `converge --help` can list them without
// loading the validation (config.ts) that only a running command needs.

export type Setting = Readonly<{
  flag: string;
  env: string;
  /** What the value looks like, for help: `<url>`, `on|off`. */
  value: string;
  /** The default as help shows it, or null for none. */
  default: string | null;
  help: string;
}>;

export const defaultStore = 'sqlite:./data/converge.db';

export const settings = {
  store: {
    flag: 'store',
    env: 'CONVERGE_STORE',
    value: '<url>',
    default: defaultStore,
    help: 'event store: sqlite:<path>, postgres://…[?schema=name], esdb://… or memory:',
  },
  sqliteSync: {
    flag: 'sqlite-sync',
    env: 'CONVERGE_SQLITE_SYNC',
    value: 'thread|group|full',
    default: 'thread',
    help: 'serve on SQLite: how an append reaches the disk before it is acked: thread (a writer thread commits and fsyncs, what waits shares a commit), group (the event loop commits, the WAL is fsynced off it, shared by the commits made meanwhile) or full (the event loop commits and SQLite fsyncs inside each commit); all survive power loss',
  },
  amqpUrl: {
    flag: 'amqp',
    env: 'CONVERGE_AMQP_URL',
    value: '<url>',
    default: null,
    help: 'RabbitMQ: amqp://user:pass@host:5672/vhost (several, comma-separated, for a cluster)',
  },
  inboxQueue: {
    flag: 'inbox-queue',
    env: 'CONVERGE_INBOX_QUEUE',
    value: 'classic|quorum',
    default: 'classic',
    help: "node inboxes: classic (lightest; on a cluster, unavailable while its broker node is down) or quorum (survives a broker node's loss; a member on every cluster node)",
  },
  inboxDeclareRate: {
    flag: 'inbox-declare-rate',
    env: 'CONVERGE_INBOX_DECLARE_RATE',
    value: '<n>',
    default: '100',
    help: 'new node inboxes the relay declares a second at most (a token bucket), so a bulk send to a fresh fleet never asks the broker for thousands of queues at once',
  },
  role: {
    flag: 'role',
    env: 'CONVERGE_ROLE',
    value: 'all|api',
    default: 'all',
    help: 'serve: all (ingest, relay and API) or api (the API over a shared store, no broker work)',
  },
  host: { flag: 'host', env: 'CONVERGE_HOST', value: '<address>', default: '127.0.0.1', help: 'HTTP API listen address' },
  port: { flag: 'port', env: 'CONVERGE_PORT', value: '<n>', default: '8080', help: 'HTTP API port (0: any free port)' },
  signingKeyPath: {
    flag: 'signing-key',
    env: 'CONVERGE_SIGNING_KEY',
    value: '<pem>',
    default: null,
    help: 'Ed25519 private key (PEM file) that signs declarations; converge keygen makes one',
  },
  apiTokens: {
    flag: 'api-tokens',
    env: 'CONVERGE_API_TOKENS',
    value: '<list>',
    default: null,
    help: 'bearer tokens of the HTTP API: token:scope[,scope] entries separated by ; (scopes read, send)',
  },
  graceMs: {
    flag: 'grace-ms',
    env: 'CONVERGE_GRACE_MS',
    value: '<ms>',
    default: '60000',
    help: 'a node silent this long is disconnected',
  },
  snapshotPath: {
    flag: 'snapshot',
    env: 'CONVERGE_SNAPSHOT',
    value: '<path>',
    default: '<sqlite file>.snapshot',
    help: 'read-model snapshot file',
  },
  notifyConfig: {
    flag: 'notify-config',
    env: 'CONVERGE_NOTIFY_CONFIG',
    value: '<file>',
    default: null,
    help: 'notifications: destinations, filters and secrets in a JSON file (docs/operations.md "Notifications")',
  },
  snapshotEvery: {
    flag: 'snapshot-every',
    env: 'CONVERGE_SNAPSHOT_EVERY',
    value: '<events>',
    default: '10000',
    help: 'write the snapshot after at least this many events',
  },
  snapshotPerNode: {
    flag: 'snapshot-per-node',
    env: 'CONVERGE_SNAPSHOT_PER_NODE',
    value: '<events>',
    default: '10',
    help: 'and after at least this many events per node held, so a snapshot costs the same per event at any fleet size (0: --snapshot-every alone)',
  },
  logLevel: {
    flag: 'log-level',
    env: 'CONVERGE_LOG_LEVEL',
    value: '<level>',
    default: null,
    help: 'fatal, error, warn, info, debug, trace or silent (serve: info; other commands: warn)',
  },
  trustMissingUserId: {
    flag: 'trust-missing-user-id',
    env: 'CONVERGE_TRUST_MISSING_USER_ID',
    value: 'on|off',
    default: 'off',
    help: 'accept a report or alive without user_id as from the node its body names (trusted labs only, docs/design.md §1)',
  },
  lastSeenFlushMs: {
    flag: 'last-seen-flush-ms',
    env: 'CONVERGE_LAST_SEEN_FLUSH_MS',
    value: '<ms>',
    default: '5000 (half of a shorter --grace-ms)',
    help: 'write the last-seen lease this often: after a crash the record loses at most this much of liveness (shorter than --grace-ms)',
  },
  engineId: {
    flag: 'engine-id',
    env: 'CONVERGE_ENGINE_ID',
    value: '<name>',
    default: 'the host name',
    help: "this engine's name in the record's observation spans; stable across restarts, one per engine sharing a store",
  },
  managementUrl: {
    flag: 'management-url',
    env: 'CONVERGE_MANAGEMENT_URL',
    value: '<url>',
    default: 'http://guest:guest@127.0.0.1:15672',
    help: "RabbitMQ management API: node accounts, the mesh.dead bound, the relay's fence",
  },
  nodeReportRate: {
    flag: 'node-report-rate',
    env: 'CONVERGE_NODE_REPORT_RATE',
    value: '<units/s>',
    default: '20',
    help: 'per-node budget: units a second (a message costs one per started 4 KiB); over it, mesh.dead (0: no budget)',
  },
  nodeReportBurst: {
    flag: 'node-report-burst',
    env: 'CONVERGE_NODE_REPORT_BURST',
    value: '<units>',
    default: '1000',
    help: 'per-node budget: units a node may spend at once after a quiet spell',
  },
  deadLetterMaxLength: {
    flag: 'dead-letter-max-length',
    env: 'CONVERGE_DEAD_LETTER_MAX_LENGTH',
    value: '<messages>',
    default: '100000',
    help: 'serve bounds mesh.dead by an operator policy: the oldest beyond this many go (0: leave mesh.dead unbounded)',
  },
  deadLetterMaxBytes: {
    flag: 'dead-letter-max-bytes',
    env: 'CONVERGE_DEAD_LETTER_MAX_BYTES',
    value: '<bytes>',
    default: '268435456',
    help: 'and beyond this many bytes of bodies (256 MiB)',
  },
  // What the HTTP API holds open (docs/operations.md, Connection caps).
  maxStreams: {
    flag: 'max-streams',
    env: 'CONVERGE_MAX_STREAMS',
    value: '<n>',
    default: '1000',
    help: 'event streams (GET /v1/events) open at once; past it, 503 with Retry-After',
  },
  maxStreamsPerClient: {
    flag: 'max-streams-per-client',
    env: 'CONVERGE_MAX_STREAMS_PER_CLIENT',
    value: '<n>',
    default: '10',
    help: 'event streams one token (with reads open: one address) may hold; past it, 429 with Retry-After',
  },
  maxAwaits: {
    flag: 'max-awaits',
    env: 'CONVERGE_MAX_AWAITS',
    value: '<n>',
    default: '1000',
    help: 'awaits (GET /v1/nodes/:node/await) open at once; past it, 503 with Retry-After',
  },
  maxAwaitsPerClient: {
    flag: 'max-awaits-per-client',
    env: 'CONVERGE_MAX_AWAITS_PER_CLIENT',
    value: '<n>',
    default: '100',
    help: 'awaits one token (with reads open: one address) may hold; past it, 429 with Retry-After',
  },
  maxConnections: {
    flag: 'max-connections',
    env: 'CONVERGE_MAX_CONNECTIONS',
    value: '<n>',
    default: '4000',
    help: 'sockets the API listener holds; past it a new one is closed at once (more than --max-streams + --max-awaits)',
  },
  streamMaxMs: {
    flag: 'stream-max-ms',
    env: 'CONVERGE_STREAM_MAX_MS',
    value: '<ms>',
    default: '3600000',
    help: 'an event stream ends after this long; the client resumes with Last-Event-ID',
  },
  idleTimeoutMs: {
    flag: 'idle-timeout-ms',
    env: 'CONVERGE_IDLE_TIMEOUT_MS',
    value: '<ms>',
    default: '10000',
    help: 'a kept-alive connection idle this long after an answer is closed',
  },
  requestTimeoutMs: {
    flag: 'request-timeout-ms',
    env: 'CONVERGE_REQUEST_TIMEOUT_MS',
    value: '<ms>',
    default: '30000',
    help: "a request's headers and body must arrive within this; a connection silent this long is closed (streams and awaits excepted)",
  },
  maxRolloutTargets: {
    flag: 'max-rollout-targets',
    env: 'CONVERGE_MAX_ROLLOUT_TARGETS',
    value: '<n>',
    default: '100000',
    help: 'nodes one rollout may target; past it, POST /v1/rollouts is 400 CONVERGE_ERR_ROLLOUT_PLAN naming the limit',
  },
  maxOpenRollouts: {
    flag: 'max-open-rollouts',
    env: 'CONVERGE_MAX_OPEN_ROLLOUTS',
    value: '<n>',
    default: '16',
    help: 'rollouts open (not halted, completed or aborted) at once; past it, a new one is 400 CONVERGE_ERR_ROLLOUT_PLAN naming the limit',
  },
  maxBulkDeclarations: {
    flag: 'max-bulk-declarations',
    env: 'CONVERGE_MAX_BULK_DECLARATIONS',
    value: '<n>',
    default: '1000',
    help: 'declarations one POST /v1/declarations may carry; past it, 400 CONVERGE_ERR_BAD_REQUEST naming the limit',
  },
  maxBytesPerTokenPerMinute: {
    flag: 'max-bytes-per-token-per-minute',
    env: 'CONVERGE_MAX_BYTES_PER_TOKEN_PER_MINUTE',
    value: '<bytes>',
    default: '268435456',
    help: 'bytes of request bodies one API token may send to the write routes a minute (256 MiB); past it, 429 with Retry-After naming the limit',
  },
  allowSharedVhost: {
    flag: 'allow-shared-vhost',
    env: 'CONVERGE_ALLOW_SHARED_VHOST',
    value: 'on|off',
    default: 'off',
    help: "serve: start even when the broker vhost carries another store's reports (logged as an error); off refuses, since two stores on one vhost split the reports",
  },
  stopTimeoutMs: {
    flag: 'stop-timeout-ms',
    env: 'CONVERGE_STOP_TIMEOUT_MS',
    value: '<ms>',
    default: '25000',
    help: 'serve: on SIGTERM or SIGINT, exit within this even if the broker or the store does not answer (exit 1 if the clean stop did not finish)',
  },
  adminListen: {
    flag: 'admin-listen',
    env: 'CONVERGE_ADMIN_LISTEN',
    value: '<host:port>',
    default: null,
    help: 'serve /healthz, /readyz and /metrics on a listener of their own too, answered whatever the API listener holds',
  },
  // What a client command (converge wait) talks to: a running engine's HTTP API.
  server: {
    flag: 'server',
    env: 'CONVERGE_SERVER',
    value: '<url>',
    default: 'http://127.0.0.1:8080',
    help: 'the HTTP API of a running converge serve, for the commands that ask it (wait)',
  },
  token: {
    flag: 'token',
    env: 'CONVERGE_TOKEN',
    value: '<token>',
    default: null,
    help: 'bearer token sent to --server (one with the read scope, when the server has --api-tokens)',
  },
  // Signed checkpoints of the audit tree and their witnesses (docs/audit.md#checkpoints-and-witnesses).
  auditKeyPath: {
    flag: 'audit-key',
    env: 'CONVERGE_AUDIT_KEY',
    value: '<pem>',
    default: null,
    help: "sign the audit tree's head with this Ed25519 key (converge keygen --audit) and keep the checkpoints in the log (stream audit)",
  },
  checkpointEveryEvents: {
    flag: 'checkpoint-every-events',
    env: 'CONVERGE_CHECKPOINT_EVERY_EVENTS',
    value: '<events>',
    default: '10000',
    help: 'with --audit-key: a checkpoint after this many events',
  },
  checkpointEveryMs: {
    flag: 'checkpoint-every-ms',
    env: 'CONVERGE_CHECKPOINT_EVERY_MS',
    value: '<ms>',
    default: '60000',
    help: 'with --audit-key: and after this long if anything was appended (and always on stop)',
  },
  witnessDir: {
    flag: 'witness-dir',
    env: 'CONVERGE_WITNESS_DIR',
    value: '<dir>',
    default: null,
    help: "with --audit-key: write each checkpoint to this folder too, one JSON file each (keep it off the store's host)",
  },
  witnessUrl: {
    flag: 'witness-url',
    env: 'CONVERGE_WITNESS_URL',
    value: '<url>',
    default: null,
    help: 'with --audit-key: POST each checkpoint as JSON to this URL, retried with backoff',
  },
  archiveDir: {
    flag: 'archive-dir',
    env: 'CONVERGE_ARCHIVE_DIR',
    value: '<dir>',
    default: null,
    help: 'the archive of closed history (docs/operations.md "Retention and archive"): where serve --retain and store archive move it, and where history, state, forensics, replay and audit verify read it back',
  },
  retain: {
    flag: 'retain',
    env: 'CONVERGE_RETAIN',
    value: '<30d>',
    default: null,
    help: 'serve, with --archive-dir: move node events older than this (at least 1h; and below the latest snapshot) to the archive, in bounded batches, every 10 minutes',
  },
  tracing: {
    flag: 'tracing',
    env: 'CONVERGE_TRACING',
    value: 'on|off',
    default: 'off',
    help: 'serve: OpenTelemetry traces of sends and reports over OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT (docs/operations.md "Tracing")',
  },
} as const satisfies Record<string, Setting>;

export type ConfigKey = keyof typeof settings;
export const configKeys = Object.keys(settings) as ConfigKey[];

/** `--store <url>    event store: … [CONVERGE_STORE, default sqlite:./data/converge.db]`, for help. */
export const settingHelp = (key: ConfigKey, width = 32, shownDefault: string | null = settings[key].default): string => {
  const s: Setting = settings[key];
  return `${`--${s.flag} ${s.value}`.padEnd(width)} ${s.help} [${s.env}${shownDefault === null ? '' : `, default ${shownDefault}`}]`;
};
