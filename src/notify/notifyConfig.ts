import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ConvergeError } from '../core/errors.ts';
import { severities, triggerNames } from './triggers.ts';
import type { Notification, Severity, TriggerName } from './triggers.ts';

// `--notify-config <file>`: JSON (the repository has no YAML library). Secrets are named, never
// written in the file: `{"env": "NAME"}` or `{"file": "/path"}`, read at start and kept out of
// every log line and API answer (`converge notify list` shows where a secret comes from, not it).

const secretSource = z.union([z.object({ env: z.string().min(1) }).strict(), z.object({ file: z.string().min(1) }).strict()]);

const filter = z
  .object({
    triggers: z.array(z.enum(triggerNames as [TriggerName, ...TriggerName[]])).optional(),
    minSeverity: z.enum(severities).default('info'),
    nodePrefix: z.string().optional(),
    specDigest: z.string().optional(),
    rollout: z.string().optional(),
  })
  .strict();

const destination = z
  .object({
    name: z.string().regex(/^[a-zA-Z0-9._-]{1,64}$/, 'letters, digits, . _ - (at most 64)'),
    kind: z.enum(['webhook', 'slack']),
    url: z.string().url(),
    secret: secretSource.optional(),
    filter: filter.prefault({}),
    timeoutMs: z.number().int().min(100).max(120_000).default(10_000),
    /** Notifications held in memory for this destination; past it they are counted into one summary per trigger. */
    queueLimit: z.number().int().min(1).max(10_000_000).default(10_000),
    coalesce: z
      .object({
        windowMs: z.number().int().min(1).max(86_400_000).default(60_000),
        maxPerWindow: z.number().int().min(1).max(10_000).default(10),
        firstNodes: z.number().int().min(1).max(1_000).default(20),
      })
      .strict()
      .prefault({}),
    retry: z
      .object({ minMs: z.number().int().min(1).default(500), maxMs: z.number().int().min(1).default(60_000) })
      .strict()
      .prefault({}),
  })
  .strict();

/** Triggers on time alone and on health (watch.ts): each threshold set turns its triggers on. */
const watch = z
  .object({
    behindMs: z.number().int().min(1).optional(),
    disconnectedMs: z.number().int().min(1).optional(),
    unhealthyMs: z.number().int().min(1).optional(),
    checkMs: z.number().int().min(10).max(3_600_000).default(5_000),
  })
  .strict();

const fileSchema = z.object({ destinations: z.array(destination), watch: watch.optional() }).strict();

export type SecretSource = z.infer<typeof secretSource>;
export type NotifyFilter = z.infer<typeof filter>;
export type DestinationConfig = z.infer<typeof destination> & Readonly<{ secretValue: string | null }>;
export type WatchFileConfig = z.infer<typeof watch>;
export type NotifyConfig = Readonly<{ path: string; destinations: readonly DestinationConfig[]; watch?: WatchFileConfig | undefined }>;

function readSecret(name: string, s: SecretSource, env: NodeJS.ProcessEnv): string {
  const value = 'env' in s ? env[s.env] : readText(s.file, `destination ${name}: secret file`);
  if (value === undefined || value.trim() === '')
    throw new ConvergeError(
      'CONVERGE_ERR_CONFIG_INVALID',
      `notify destination ${name}: its secret (${describeSecret(s)}) is empty or unset`,
    );
  return value.trim();
}

function readText(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConvergeError('CONVERGE_ERR_CONFIG_INVALID', `${what} ${path} cannot be read: ${(err as Error).message}`);
  }
}

export const describeSecret = (s: SecretSource | undefined): string =>
  s === undefined ? 'none' : 'env' in s ? `env ${s.env}` : `file ${s.file}`;

/** Parse the file's text; a bad file is refused whole with the field that is wrong. */
export function parseNotifyConfig(text: string, path: string, env: NodeJS.ProcessEnv = process.env): NotifyConfig {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ConvergeError('CONVERGE_ERR_CONFIG_INVALID', `--notify-config ${path} is not JSON: ${(err as Error).message}`);
  }
  const r = fileSchema.safeParse(json);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    throw new ConvergeError('CONVERGE_ERR_CONFIG_INVALID', `--notify-config ${path}: ${issue.path.join('.') || '(top)'}: ${issue.message}`);
  }
  const seen = new Set<string>();
  const destinations = r.data.destinations.map((d) => {
    if (seen.has(d.name))
      throw new ConvergeError('CONVERGE_ERR_CONFIG_INVALID', `--notify-config ${path}: destination ${d.name} is named twice`);
    seen.add(d.name);
    return { ...d, secretValue: d.secret === undefined ? null : readSecret(d.name, d.secret, env) };
  });
  return { path, destinations, ...(r.data.watch === undefined ? {} : { watch: r.data.watch }) };
}

export const loadNotifyConfig = (path: string, env: NodeJS.ProcessEnv = process.env): NotifyConfig =>
  parseNotifyConfig(readText(path, '--notify-config'), path, env);

const rank: Record<Severity, number> = { info: 0, warning: 1, critical: 2 };

/** Whether a destination wants this notification. */
export function matches(f: NotifyFilter, n: Notification): boolean {
  if (rank[n.severity] < rank[f.minSeverity]) return false;
  if (f.triggers !== undefined && !f.triggers.includes(n.trigger)) return false;
  if (f.nodePrefix !== undefined && (n.node === null || !n.node.startsWith(f.nodePrefix))) return false;
  if (f.specDigest !== undefined && n.specDigest !== f.specDigest) return false;
  if (f.rollout !== undefined && n.rollout !== f.rollout) return false;
  return true;
}
