import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { ParseArgsConfig } from 'node:util';
import pino from 'pino';
import type { Logger } from 'pino';
import type { Config } from '../app/config.ts';
import { ConvergeError } from '../errors.ts';
import { openEventStore } from '../store/index.ts';
import type { EventStore } from '../store/index.ts';
import type { CliIo } from './io.ts';

// One shape for every subcommand: its flags (node:util parseArgs options), a help text, and
// a run function that gets parsed values, the validated config and the io. It returns the
// exit status; throwing a ConvergeError ends the process with its one-line reason.

export type Options = NonNullable<ParseArgsConfig['options']>;
export type Values = Readonly<Record<string, string | boolean | undefined>>;

export type Context = Readonly<{
  io: CliIo;
  values: Values;
  positionals: readonly string[];
  config: Config;
  json: boolean;
  /** Logs to stderr at the configured level (or silent for read commands). */
  logger: Logger;
}>;

export type Command = Readonly<{
  name: string;
  usage: string;
  summary: string;
  /** Flags beyond the shared ones (--json, --help, and the config flags). */
  options: Options;
  /** Positional arguments: [min, max]. */
  args: readonly [number, number];
  /** Long-running commands log at info; read commands stay quiet unless asked. */
  defaultLogLevel?: Config['logLevel'];
  run: (ctx: Context) => Promise<number>;
}>;

export const makeLogger = (level: Config['logLevel']): Logger =>
  pino(
    { level, redact: { paths: ['signingKey', '*.signingKey', 'token', '*.token', 'req.headers.authorization'], censor: '[redacted]' } },
    pino.destination(2),
  );

/** Open the configured store; for a read command, a SQLite file that is not there is an error, not a new empty store. */
export function openStore(config: Config, io: CliIo, mustExist: boolean): EventStore {
  if (mustExist && config.store.startsWith('sqlite:')) {
    const path = config.store.slice('sqlite:'.length);
    if (path !== ':memory:' && !existsSync(resolve(io.cwd, path))) {
      throw new ConvergeError('CONVERGE_ERR_STORE_UNAVAILABLE', `store ${config.store} does not exist (set --store or CONVERGE_STORE)`);
    }
  }
  return openEventStore(config.store);
}

/** Run `fn` with the store open, closing it however `fn` ends. */
export async function withStore<T>(config: Config, io: CliIo, fn: (store: EventStore) => Promise<T>): Promise<T> {
  const store = openStore(config, io, true);
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}
