import { createPrivateKey } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { z } from 'zod';
import { parseApiTokens } from '../api/auth.ts';
import { defaultCaps } from '../api/connectionCaps.ts';
import { defaultListenerLimits } from '../api/listenerLimits.ts';
import { defaultStreamMaxMs } from '../api/sse.ts';
import { defaultWriteLimits } from '../api/writeLimits.ts';
import { defaultRolloutLimits } from '../engine/rolloutCommands.ts';
import type { TokenTable } from '../api/auth.ts';
import { signingKeyFromPem } from '../core/declaration/index.ts';
import type { SigningKey } from '../core/declaration/index.ts';
import { ConvergeError } from '../core/errors.ts';
import { amqpUrlListProblems, redactUrl, splitAmqpUrls } from '../transport/amqpUrls.ts';
import { configKeys, defaultStore, settings } from './settings.ts';
import type { ConfigKey } from './settings.ts';

/**
 * The shortest retention policy: an event id stops blocking a retried append once its event is
 * archived, and the engine's own retries (a report redelivered after a dropped connection, a
 * resumed send) come within minutes, so a policy of an hour or more keeps every such retry's first
 * copy hot (docs/operations.md "Retention and archive").
 */
export const minRetainMs = 3_600_000;
export const retainFloorMessage = 'must be at least 1h: a retried append is recognised by its event id only while the first copy is hot';

// Configuration (docs/design.md §6): flags override CONVERGE_* environment variables; everything is
// validated once, here, at start, and the result is frozen. A mistake is reported as one line
// naming the flag and the variable, all mistakes at once, so an operator fixes them in one go.

export type Config = Readonly<{
  store: string;
  /** serve on SQLite: the writer thread (src/store/sqlite/sqliteWriterThread.ts), group commit off the event loop (walSync.ts), or SQLite's synchronous=FULL on it. */
  sqliteSync: 'thread' | 'group' | 'full';
  /** One URL or several separated by commas (the nodes of a cluster), each checked. */
  amqpUrl: string | null;
  /** `all`: ingest, relay and API; `api`: only the API over the store (scaling out reads). */
  role: 'all' | 'api';
  /** The form node inboxes are declared in (src/transport/topology.ts). */
  inboxQueue: 'classic' | 'quorum';
  inboxDeclareRate: number;
  host: string;
  port: number;
  signingKeyPath: string | null;
  signingKey: SigningKey | null;
  apiTokens: TokenTable;
  graceMs: number;
  snapshotPath: string | null;
  /**
   * Where an earlier engine kept the default snapshot (`<sqlite file>.snapshot.json`, a
   * binary file since format 5): read when `snapshotPath` does not exist yet, so an upgraded
   * installation starts warm; null when the snapshot path was set.
   */
  snapshotFormerPath: string | null;
  snapshotEvery: number;
  /** The notifications' JSON file (src/notify/notifyConfig.ts), or null: none sent. */
  notifyConfig: string | null;
  snapshotPerNode: number;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  trustMissingUserId: boolean;
  /** How often the last-seen lease is written: the bound on what a crash loses of liveness (docs/design.md §3). */
  lastSeenFlushMs: number;
  /** This engine's name in the observation spans (default the host name). */
  engineId: string;
  managementUrl: string;
  /** Budget units (a message per started 4 KiB) each node may sustain per second before the excess is refused (0: no budget). */
  nodeReportRate: number;
  /** Units a node may spend at once after a quiet spell. */
  nodeReportBurst: number;
  /** Messages mesh.dead keeps (an operator policy set by serve, drop-head); 0 sets no policy. */
  deadLetterMaxLength: number;
  /** Body bytes mesh.dead keeps, likewise. */
  deadLetterMaxBytes: number;
  /** Caps on what the API holds open (src/api/connectionCaps.ts). */
  maxStreams: number;
  maxStreamsPerClient: number;
  maxAwaits: number;
  maxAwaitsPerClient: number;
  /** Sockets the API listener holds (src/api/listenerLimits.ts). */
  maxConnections: number;
  streamMaxMs: number;
  idleTimeoutMs: number;
  requestTimeoutMs: number;
  /** What one rollout may target and how many may be open at once (src/engine/rolloutCommands.ts). */
  maxRolloutTargets: number;
  maxOpenRollouts: number;
  /** Declarations in one bulk call and body bytes a token may write a minute (src/api/writeLimits.ts). */
  maxBulkDeclarations: number;
  maxBytesPerTokenPerMinute: number;
  /** serve: start on a vhost whose reports another store records (src/transport/vhostOwner.ts). */
  allowSharedVhost: boolean;
  /** serve's bound on its stop after SIGTERM: past it, it exits without finishing (src/cli/commands/serve.ts). */
  stopTimeoutMs: number;
  /** Where /healthz, /readyz and /metrics are served on a listener of their own; null: not. */
  adminListen: Readonly<{ host: string; port: number }> | null;
  /** The API a client command asks (converge wait), and its bearer token. */
  server: string;
  token: string | null;
  /** The Ed25519 key the engine signs audit checkpoints with (docs/audit.md#checkpoints-and-witnesses); null: none made. */
  auditKeyPath: string | null;
  auditKey: KeyObject | null;
  checkpointEveryEvents: number;
  checkpointEveryMs: number;
  witnessDir: string | null;
  witnessUrl: string | null;
  /** Where closed history is archived and read back from (docs/operations.md "Retention and archive"); null: no archive. */
  archiveDir: string | null;
  /** serve: archive node events older than this many ms; null: never. */
  retain: number | null;
  /** OpenTelemetry traces exported over OTLP/HTTP (src/tracing/); off: none of the SDK is loaded. */
  tracing: boolean;
}>;

export { defaultStore } from './settings.ts';
export type { ConfigKey } from './settings.ts';

const intIn = (min: number, max: number) =>
  z.coerce
    .number({ error: 'must be a number' })
    .int('must be a whole number')
    .min(min, `must be at least ${min}`)
    .max(max, `must be at most ${max}`);

const schema = z.object({
  store: z
    .string()
    .default(defaultStore)
    .refine(
      (s) => s === 'memory:' || /^sqlite:.+/.test(s) || /^esdb(\+discover)?:\/\/.+/.test(s) || /^postgres(ql)?:\/\/.+/.test(s),
      'must be sqlite:<path>, postgres://…, esdb://… or memory:',
    ),
  sqliteSync: z.enum(['thread', 'group', 'full'], { error: 'must be thread, group or full' }).default('thread'),
  // One broker URL, or a cluster's nodes separated by commas; each checked here so
  // a typo fails the start instead of the first failover.
  amqpUrl: z
    .string()
    .superRefine((s, ctx) => {
      for (const p of amqpUrlListProblems(s))
        ctx.addIssue({ code: 'custom', message: `must be amqp:// or amqps:// URLs separated by commas: ${p}` });
    })
    .nullable()
    .default(null),
  role: z.enum(['all', 'api'], { error: 'must be all or api' }).default('all'),
  inboxQueue: z.enum(['classic', 'quorum'], { error: 'must be classic or quorum' }).default('classic'),
  inboxDeclareRate: intIn(1, 100_000).default(100),
  host: z.string().min(1).default('127.0.0.1'),
  port: intIn(0, 65535).default(8080),
  signingKeyPath: z.string().min(1).nullable().default(null),
  apiTokens: z.string().default(''),
  graceMs: intIn(1, 86_400_000).default(60_000),
  snapshotPath: z.string().min(1).nullable().default(null),
  snapshotEvery: intIn(1, 100_000_000).default(10_000),
  notifyConfig: z.string().min(1).nullable().default(null),
  snapshotPerNode: intIn(0, 1_000_000).default(10),
  logLevel: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], {
      error: 'must be one of fatal, error, warn, info, debug, trace, silent',
    })
    .default('info'),
  trustMissingUserId: z
    .enum(['on', 'off', 'true', 'false', '1', '0'], { error: 'must be on or off' })
    .default('off')
    .transform((v) => v === 'on' || v === 'true' || v === '1'),
  lastSeenFlushMs: intIn(100, 3_600_000).default(5_000),
  engineId: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/, 'must be 1–128 letters, digits, ".", "_", ":" or "-"')
    .default(hostname().slice(0, 128) || 'engine'),
  managementUrl: z
    .string()
    .refine((s) => /^https?:\/\/.+/.test(s), 'must be an http:// or https:// URL')
    .default(settings.managementUrl.default),
  // Units of one message per started 4 KiB (src/engine/nodeBudget.ts). A node reports
  // after it applies something, rarely (wire.go): 20/s is far above that, and a burst of 1,000
  // rides out an engine restart with reports queued meanwhile.
  nodeReportRate: intIn(0, 1_000_000).default(20),
  nodeReportBurst: intIn(1, 1_000_000).default(1000),
  // The newest 100,000 refusals, within 256 MiB, is days of a misbehaving
  // fleet and a few seconds of a flood; either way the queue no longer grows without end.
  deadLetterMaxLength: intIn(0, 100_000_000).default(100_000),
  deadLetterMaxBytes: intIn(1, Number.MAX_SAFE_INTEGER).default(256 * 1024 * 1024),
  // The defaults of src/api/connectionCaps.ts and listenerLimits.ts. A dashboard
  // holds one stream and a pipeline a few awaits; 4,000 sockets leave 2,000 for short requests
  // and probes, and stay below the 20,000 descriptors at which the issue's engine stopped.
  maxStreams: intIn(1, 1_000_000).default(defaultCaps.streams),
  maxStreamsPerClient: intIn(1, 1_000_000).default(defaultCaps.streamsPerClient),
  maxAwaits: intIn(1, 1_000_000).default(defaultCaps.awaits),
  maxAwaitsPerClient: intIn(1, 1_000_000).default(defaultCaps.awaitsPerClient),
  maxConnections: intIn(1, 10_000_000).default(defaultListenerLimits.maxConnections),
  streamMaxMs: intIn(1_000, 86_400_000).default(defaultStreamMaxMs),
  idleTimeoutMs: intIn(100, 3_600_000).default(defaultListenerLimits.idleMs),
  requestTimeoutMs: intIn(100, 3_600_000).default(defaultListenerLimits.requestTimeoutMs),
  maxRolloutTargets: intIn(1, 10_000_000).default(defaultRolloutLimits.maxTargets),
  maxOpenRollouts: intIn(1, 10_000).default(defaultRolloutLimits.maxOpen),
  maxBulkDeclarations: intIn(1, 100_000).default(defaultWriteLimits.maxBulkDeclarations),
  maxBytesPerTokenPerMinute: intIn(1024, Number.MAX_SAFE_INTEGER).default(defaultWriteLimits.maxBytesPerTokenPerMinute),
  allowSharedVhost: z
    .enum(['on', 'off', 'true', 'false', '1', '0'], { error: 'must be on or off' })
    .default('off')
    .transform((v) => v === 'on' || v === 'true' || v === '1'),
  stopTimeoutMs: intIn(100, 3_600_000).default(25_000),
  adminListen: z
    .string()
    .transform((s, ctx) => {
      // host:port, [v6]:port
      const m = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(s);
      const port = Number(m?.[3]);
      if (m === null || port > 65535) {
        ctx.addIssue({ code: 'custom', message: 'must be <host>:<port>, e.g. 127.0.0.1:9464 or [::1]:9464' });
        return z.NEVER;
      }
      return { host: m[1] ?? m[2]!, port };
    })
    .nullable()
    .default(null),
  server: z
    .string()
    .refine((s) => /^https?:\/\/[^/]+/.test(s), 'must be an http:// or https:// URL')
    .default(settings.server.default),
  token: z.string().min(1).nullable().default(null),
  auditKeyPath: z.string().min(1).nullable().default(null),
  checkpointEveryEvents: intIn(1, 100_000_000).default(10_000),
  checkpointEveryMs: intIn(10, 86_400_000).default(60_000),
  witnessDir: z.string().min(1).nullable().default(null),
  archiveDir: z.string().min(1).nullable().default(null),
  retain: z
    .string()
    .regex(/^\d+(ms|s|m|h|d)$/, 'must be a duration like 30d, 12h or 90m')
    .transform((t) => retainMs(t))
    .refine((ms) => ms >= minRetainMs, retainFloorMessage)
    .nullable()
    .default(null),
  witnessUrl: z
    .string()
    .refine((s) => /^https?:\/\/.+/.test(s), 'must be an http:// or https:// URL')
    .nullable()
    .default(null),
  tracing: z
    .enum(['on', 'off', 'true', 'false', '1', '0'], { error: 'must be on or off' })
    .default('off')
    .transform((v) => v === 'on' || v === 'true' || v === '1'),
});

/** A value as an error line may echo it: broker URLs carry passwords, and a token is one. */
const shown = (key: ConfigKey, value: unknown): unknown =>
  key === 'token' ? '…' : key === 'amqpUrl' && typeof value === 'string' ? splitAmqpUrls(value).map(redactUrl).join(',') : value;

export type ConfigSource = Readonly<{
  flags: Readonly<Record<string, string | boolean | undefined>>;
  env: Readonly<Record<string, string | undefined>>;
  /** A settings file's values (configFile.ts): below flags and variables, above the defaults. */
  file?: Readonly<Partial<Record<ConfigKey, string>>>;
}>;

/**
 * Read, check and freeze the configuration. Only the settings in `uses` are read and checked
 * (a command validates what it uses: a bad CONVERGE_API_TOKENS in the shell must not stop
 * `converge status`); the others keep their defaults. Throws CONVERGE_ERR_CONFIG_INVALID with
 * `details.lines`, one per mistake.
 */
export function loadConfig(
  { flags, env, file = {} }: ConfigSource,
  overrides: Partial<Record<ConfigKey, string>> = {},
  uses: readonly ConfigKey[] = configKeys,
): Config {
  const used = new Set(uses);
  const raw: Record<string, unknown> = {};
  for (const key of used) {
    const s = settings[key];
    const flag = flags[s.flag];
    const value = typeof flag === 'string' ? flag : (env[s.env] ?? file[key] ?? overrides[key]);
    if (value !== undefined && value !== '') raw[key] = value;
  }
  const lines: string[] = [];
  const r = schema.safeParse(raw);
  if (!r.success) {
    for (const issue of r.error.issues) {
      const key = String(issue.path[0]) as ConfigKey;
      const s = settings[key];
      lines.push(
        `--${s.flag} / ${s.env}: ${issue.message}${raw[key] === undefined ? '' : ` (got ${JSON.stringify(shown(key, raw[key]))})`}`,
      );
    }
  }
  const tokens = parseApiTokens(typeof raw.apiTokens === 'string' ? raw.apiTokens : '');
  for (const e of tokens.errors) lines.push(`--api-tokens / CONVERGE_API_TOKENS: ${e}`);

  let signingKey: SigningKey | null = null;
  const keyPath = typeof raw.signingKeyPath === 'string' ? raw.signingKeyPath : null;
  if (keyPath !== null) {
    try {
      signingKey = signingKeyFromPem(readFileSync(keyPath));
    } catch (e) {
      const why = (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'file not found' : (e as Error).message;
      lines.push(`--signing-key / CONVERGE_SIGNING_KEY: cannot use ${keyPath}: ${why}`);
    }
  }
  const auditKey = readAuditKey(raw, lines);
  if (r.success && r.data.retain !== null && r.data.archiveDir === null)
    lines.push('--retain / CONVERGE_RETAIN: needs --archive-dir / CONVERGE_ARCHIVE_DIR (history is archived, never deleted)');
  // Only history below the engine's own snapshot moves; a SQLite file has one beside it by default.
  if (r.success && r.data.retain !== null && r.data.snapshotPath === null && /^postgres(ql)?:\/\//.test(r.data.store))
    lines.push(
      '--retain / CONVERGE_RETAIN: on a postgres:// store needs --snapshot / CONVERGE_SNAPSHOT (only history below the snapshot is archived)',
    );
  // docs/design.md §3: a crash loses at most one flush of last-seen times; a flush as long as the
  // grace would let a crash hide a whole silence.
  if (r.success && used.has('lastSeenFlushMs') && r.data.lastSeenFlushMs >= r.data.graceMs) {
    lines.push(
      `--last-seen-flush-ms / CONVERGE_LAST_SEEN_FLUSH_MS: must be shorter than --grace-ms (${r.data.graceMs}) (got ${r.data.lastSeenFlushMs})`,
    );
  }
  // Sockets past the caps are the reserve that answers short requests and the
  // probes while every stream and await is held.
  if (r.success) {
    const d = r.data;
    if (used.has('maxConnections') && d.maxConnections <= d.maxStreams + d.maxAwaits)
      lines.push(
        `--max-connections / CONVERGE_MAX_CONNECTIONS: must be more than --max-streams + --max-awaits (${d.maxStreams + d.maxAwaits}), or held streams and awaits leave no socket for a probe (got ${d.maxConnections})`,
      );
    if (used.has('maxStreamsPerClient') && d.maxStreamsPerClient > d.maxStreams)
      lines.push(
        `--max-streams-per-client / CONVERGE_MAX_STREAMS_PER_CLIENT: must be at most --max-streams (${d.maxStreams}) (got ${d.maxStreamsPerClient})`,
      );
    if (used.has('maxAwaitsPerClient') && d.maxAwaitsPerClient > d.maxAwaits)
      lines.push(
        `--max-awaits-per-client / CONVERGE_MAX_AWAITS_PER_CLIENT: must be at most --max-awaits (${d.maxAwaits}) (got ${d.maxAwaitsPerClient})`,
      );
  }
  if (lines.length > 0 || !r.success) {
    throw new ConvergeError('CONVERGE_ERR_CONFIG_INVALID', lines.join('\n'), { details: { lines } });
  }
  const c = r.data;
  const sqlitePath = c.store.startsWith('sqlite:') ? c.store.slice('sqlite:'.length) : null;
  const besideStore = sqlitePath !== null && sqlitePath !== ':memory:';
  return Object.freeze({
    ...c,
    // Not given: 5 s, or half a shorter grace.
    lastSeenFlushMs: used.has('lastSeenFlushMs')
      ? c.lastSeenFlushMs
      : Math.min(c.lastSeenFlushMs, Math.max(100, Math.floor(c.graceMs / 2))),
    signingKey,
    auditKey,
    apiTokens: tokens.table,
    // Beside a SQLite file by default: a snapshot belongs with the store it summarizes.
    snapshotPath: c.snapshotPath ?? (besideStore ? `${sqlitePath}.snapshot` : null),
    snapshotFormerPath: c.snapshotPath === null && besideStore ? `${sqlitePath}.snapshot.json` : null,
  });
}

/** `30d`, `12h`, `90m`, `45s`, `1500ms` in milliseconds (the form --retain takes). */
export function retainMs(text: string): number {
  const m = /^(\d+)(ms|s|m|h|d)$/.exec(text)!;
  return Number(m[1]) * { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 'ms' | 's' | 'm' | 'h' | 'd'];
}

/** The audit key (a private Ed25519 PEM), or null; a witness without one is a mistake, not a silent no-op. */
function readAuditKey(raw: Record<string, unknown>, lines: string[]): KeyObject | null {
  const path = typeof raw.auditKeyPath === 'string' ? raw.auditKeyPath : null;
  if (path === null) {
    for (const k of ['witnessDir', 'witnessUrl'] as const) {
      if (raw[k] !== undefined)
        lines.push(`--${settings[k].flag} / ${settings[k].env}: needs --audit-key / CONVERGE_AUDIT_KEY (nothing is signed without it)`);
    }
    return null;
  }
  try {
    const key = createPrivateKey(readFileSync(path));
    if (key.asymmetricKeyType === 'ed25519') return key;
    lines.push(
      `--audit-key / CONVERGE_AUDIT_KEY: ${path} is a ${key.asymmetricKeyType ?? 'unknown'} key, not an Ed25519 private key (converge keygen --audit)`,
    );
  } catch (e) {
    const why = (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'file not found' : (e as Error).message;
    lines.push(`--audit-key / CONVERGE_AUDIT_KEY: cannot use ${path}: ${why}`);
  }
  return null;
}
