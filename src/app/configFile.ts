import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parse } from 'yaml';
import { ConvergeError } from '../core/errors.ts';
import { redactUrl } from '../transport/amqpUrls.ts';
import { configKeys, settings } from './settings.ts';
import type { ConfigKey } from './settings.ts';

// A settings file (`--config converge.yaml`, or CONVERGE_CONFIG): the same settings as the flags,
// keyed by the flag's name (`grace-ms: 60000`), below flags and variables and above defaults
// (docs/operations.md "Configuration"). YAML through the `yaml` package: a hand-written reader
// would get quoting, comments and multi-line values wrong. A key that is no setting is refused,
// so a typo does not silently leave a default in place.

/** The file's values by setting, as strings (what a flag would have carried). */
export type FileSettings = Readonly<Partial<Record<ConfigKey, string>>>;

const byFlag = new Map<string, ConfigKey>(configKeys.map((k) => [settings[k].flag, k]));

export function readConfigFile(path: string, cwd: string): FileSettings {
  const full = resolve(cwd, path);
  let text: string;
  try {
    text = readFileSync(full, 'utf8');
  } catch (err) {
    throw new ConvergeError('CONVERGE_ERR_CONFIG_INVALID', `--config ${path}: cannot be read: ${(err as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (err) {
    throw new ConvergeError('CONVERGE_ERR_CONFIG_INVALID', `--config ${path}: not YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc))
    throw new ConvergeError('CONVERGE_ERR_CONFIG_INVALID', `--config ${path}: must be a mapping of settings (grace-ms: 60000)`);
  const out: Partial<Record<ConfigKey, string>> = {};
  const lines: string[] = [];
  for (const [name, value] of Object.entries(doc as Record<string, unknown>)) {
    const key = byFlag.get(name);
    if (key === undefined) {
      lines.push(`--config ${path}: ${JSON.stringify(name)} is not a setting (converge --help lists them, as flags without the dashes)`);
      continue;
    }
    if (value === null || typeof value === 'object') {
      lines.push(`--config ${path}: ${name}: must be a single value, not ${value === null ? 'empty' : 'a list or mapping'}`);
      continue;
    }
    out[key] = String(value);
  }
  if (lines.length > 0) throw new ConvergeError('CONVERGE_ERR_CONFIG_INVALID', lines.join('\n'), { details: { lines } });
  return out;
}

export type SettingSource = 'flag' | 'env' | 'file' | 'command' | 'default';

export type SettingShown = Readonly<{ setting: string; env: string; value: string | null; source: SettingSource }>;

/** Secrets never shown: tokens by their count, URLs without their password, a key by its path only. */
export function masked(key: ConfigKey, value: string): string {
  if (key === 'apiTokens') return `(${value.split(',').filter((t) => t.trim() !== '').length} token(s), hidden)`;
  if (key === 'amqpUrl')
    return value
      .split(',')
      .map((u) => redactUrl(u.trim()))
      .join(',');
  if (key === 'store' || key === 'managementUrl') return /^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? redactUrl(value) : value;
  return value;
}

/** Each setting's value and where it came from, in the order flags > variables > file > the command's own default > the default. */
export function settingSources(
  source: Readonly<{
    flags: Readonly<Record<string, string | boolean | undefined>>;
    env: Readonly<Record<string, string | undefined>>;
    file: FileSettings;
  }>,
  overrides: Partial<Record<ConfigKey, string>>,
): SettingShown[] {
  return configKeys.map((key) => {
    const s = settings[key];
    const flag = source.flags[s.flag];
    const env = source.env[s.env];
    const [value, from]: [string | null, SettingSource] =
      typeof flag === 'string' && flag !== ''
        ? [flag, 'flag']
        : env !== undefined && env !== ''
          ? [env, 'env']
          : source.file[key] !== undefined
            ? [source.file[key]!, 'file']
            : overrides[key] !== undefined
              ? [overrides[key]!, 'command']
              : [s.default, 'default'];
    return { setting: s.flag, env: s.env, value: value === null || from === 'default' ? value : masked(key, value), source: from };
  });
}
