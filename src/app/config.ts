import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { parseApiTokens } from '../api/auth.ts';
import type { TokenTable } from '../api/auth.ts';
import { signingKeyFromPem } from '../declaration/index.ts';
import type { SigningKey } from '../declaration/index.ts';
import { ConvergeError } from '../errors.ts';

// Configuration (DESIGN §6): flags override CONVERGE_* environment variables; everything is
// validated once, here, at start, and the result is frozen. A mistake is reported as one line
// naming the flag and the variable, all mistakes at once, so an operator fixes them in one go.

export type Config = Readonly<{
  store: string;
  amqpUrl: string | null;
  host: string;
  port: number;
  signingKeyPath: string | null;
  signingKey: SigningKey | null;
  apiTokens: TokenTable;
  graceMs: number;
  snapshotPath: string | null;
  snapshotEvery: number;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  trustMissingUserId: boolean;
  aliveResolutionMs: number;
}>;

/** Each setting: its flag, its variable, and how to read it. */
const settings = {
  store: { flag: 'store', env: 'CONVERGE_STORE' },
  amqpUrl: { flag: 'amqp', env: 'CONVERGE_AMQP_URL' },
  host: { flag: 'host', env: 'CONVERGE_HOST' },
  port: { flag: 'port', env: 'CONVERGE_PORT' },
  signingKeyPath: { flag: 'signing-key', env: 'CONVERGE_SIGNING_KEY' },
  apiTokens: { flag: 'api-tokens', env: 'CONVERGE_API_TOKENS' },
  graceMs: { flag: 'grace-ms', env: 'CONVERGE_GRACE_MS' },
  snapshotPath: { flag: 'snapshot', env: 'CONVERGE_SNAPSHOT' },
  snapshotEvery: { flag: 'snapshot-every', env: 'CONVERGE_SNAPSHOT_EVERY' },
  logLevel: { flag: 'log-level', env: 'CONVERGE_LOG_LEVEL' },
  trustMissingUserId: { flag: 'trust-missing-user-id', env: 'CONVERGE_TRUST_MISSING_USER_ID' },
  aliveResolutionMs: { flag: 'alive-resolution-ms', env: 'CONVERGE_ALIVE_RESOLUTION_MS' },
} as const satisfies Record<string, { flag: string; env: string }>;

export type ConfigKey = keyof typeof settings;
export const configFlags: readonly string[] = Object.values(settings).map((s) => s.flag);
export const configHelp: readonly string[] = Object.values(settings).map((s) => `--${s.flag} (${s.env})`);

export const defaultStore = 'sqlite:./data/converge.db';

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
  amqpUrl: z
    .string()
    .refine((s) => /^amqps?:\/\/.+/.test(s), 'must be an amqp:// or amqps:// URL')
    .nullable()
    .default(null),
  host: z.string().min(1).default('127.0.0.1'),
  port: intIn(0, 65535).default(8080),
  signingKeyPath: z.string().min(1).nullable().default(null),
  apiTokens: z.string().default(''),
  graceMs: intIn(1, 86_400_000).default(60_000),
  snapshotPath: z.string().min(1).nullable().default(null),
  snapshotEvery: intIn(1, 100_000_000).default(10_000),
  logLevel: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], {
      error: 'must be one of fatal, error, warn, info, debug, trace, silent',
    })
    .default('info'),
  trustMissingUserId: z
    .enum(['on', 'off', 'true', 'false', '1', '0'], { error: 'must be on or off' })
    .default('off')
    .transform((v) => v === 'on' || v === 'true' || v === '1'),
  aliveResolutionMs: intIn(0, 3_600_000).default(15_000),
});

export type ConfigSource = Readonly<{
  flags: Readonly<Record<string, string | boolean | undefined>>;
  env: Readonly<Record<string, string | undefined>>;
}>;

/** Read, check and freeze the configuration. Throws CONVERGE_ERR_CONFIG_INVALID with `details.lines`, one per mistake. */
export function loadConfig({ flags, env }: ConfigSource, overrides: Partial<Record<ConfigKey, string>> = {}): Config {
  const raw: Record<string, unknown> = {};
  for (const [key, s] of Object.entries(settings)) {
    const flag = flags[s.flag];
    const value = typeof flag === 'string' ? flag : flag === true ? 'on' : (env[s.env] ?? overrides[key as ConfigKey]);
    if (value !== undefined && value !== '') raw[key] = value;
  }
  const lines: string[] = [];
  const r = schema.safeParse(raw);
  if (!r.success) {
    for (const issue of r.error.issues) {
      const key = String(issue.path[0]) as ConfigKey;
      const s = settings[key];
      lines.push(`--${s.flag} / ${s.env}: ${issue.message}${raw[key] === undefined ? '' : ` (got ${JSON.stringify(raw[key])})`}`);
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
  // DESIGN §2/§3: the store keeps one AliveSeen per resolution and liveness in a replay, in
  // `state --at` and in the node gauges is read from those; a window as long as the grace would
  // record a node that never went quiet as disconnected between two of them.
  if (r.success && r.data.aliveResolutionMs >= r.data.graceMs) {
    lines.push(
      `--alive-resolution-ms / CONVERGE_ALIVE_RESOLUTION_MS: must be shorter than --grace-ms (${r.data.graceMs}), or a node alive all along reads as disconnected in the record (got ${r.data.aliveResolutionMs})`,
    );
  }
  if (lines.length > 0 || !r.success) {
    throw new ConvergeError('CONVERGE_ERR_CONFIG_INVALID', lines.join('\n'), { details: { lines } });
  }
  const c = r.data;
  const sqlitePath = c.store.startsWith('sqlite:') ? c.store.slice('sqlite:'.length) : null;
  return Object.freeze({
    ...c,
    signingKey,
    apiTokens: tokens.table,
    // Beside a SQLite file by default: a snapshot belongs with the store it summarizes.
    snapshotPath: c.snapshotPath ?? (sqlitePath !== null && sqlitePath !== ':memory:' ? `${sqlitePath}.snapshot.json` : null),
  });
}
