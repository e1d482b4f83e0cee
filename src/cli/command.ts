import { existsSync, mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Config, ConfigKey } from '../app/config.ts';
import { ConvergeError } from '../core/errors.ts';
import type { EventStore, OpenEventStoreOptions } from '../store/index.ts';
import { validateNodeId } from '../core/wire/nodeId.ts';
import type { Flag } from './args.ts';
import type { CliIo } from './io.ts';
import type { OutputFormat } from './output.ts';

// One shape for every subcommand. What `--help` and the dispatcher need — name, usage, summary,
// flags, the settings it reads — is plain data in commands/index.ts; the code that runs it is a
// module loaded only when it runs, so `converge --help` loads no server, broker, store client or
// validation library. Its run function returns the exit status;
// throwing a ConvergeError ends the process with its one-line reason.

export type Values = Readonly<Record<string, string | boolean | undefined>>;

export type Context = Readonly<{
  io: CliIo;
  values: Values;
  positionals: readonly string[];
  /** The settings the command declared are read and checked; the others hold their defaults. */
  config: Config;
  /** `-o`, or json for `--json`; text when neither was given. */
  output: OutputFormat;
  /** output is json. */
  json: boolean;
  /** The settings file's values (--config / CONVERGE_CONFIG), and the command's own defaults: for `config view`. */
  file?: Readonly<Partial<Record<ConfigKey, string>>>;
  overrides?: Readonly<Partial<Record<ConfigKey, string>>>;
}>;

export type Run = (ctx: Context) => Promise<number>;

export type FlagHelp = Flag & Readonly<{ help: string }>;

export type CommandSpec = Readonly<{
  name: string;
  usage: string;
  summary: string;
  /** Flags beyond the shared ones (--json, --help, and the configuration flags). */
  flags: Readonly<Record<string, FlagHelp>>;
  /** A read command: it takes `-o json|yaml|wide|name` (and prints through printList or printOne). */
  output?: true;
  /** The words its first argument takes (`rollout start`, `forensics races`), for completion. */
  subcommands?: readonly string[];
  /** Positional arguments: [min, max]. */
  args: readonly [number, number];
  /** The configuration settings it reads; it validates these and only these. */
  settings: readonly ConfigKey[];
  /** Defaults this command puts in place of the settings table's, as its help shows them. */
  settingDefaults?: Readonly<Partial<Record<ConfigKey, string>>>;
  /** Long-running commands log at info; the others at warn unless asked. */
  defaultLogLevel?: Config['logLevel'];
  /** The module that runs it, imported when it runs. */
  load: () => Promise<Readonly<{ run: Run }>>;
}>;

/** A node id argument: a malformed one is a usage mistake (exit 2), whatever the command. */
export const nodeArgument = (value: string): string => validateNodeId(value);

const sqlitePathOf = (store: string): string | null => {
  if (!store.startsWith('sqlite:')) return null;
  const path = store.slice('sqlite:'.length);
  return path === ':memory:' ? null : path;
};

/** The configured store's SQLite file, resolved against the command's working directory; null for other stores. */
export function sqliteFileOf(config: Config, io: CliIo): string | null {
  const path = sqlitePathOf(config.store);
  return path === null ? null : resolve(io.cwd, path);
}

export type OpenStoreOptions = OpenEventStoreOptions &
  Readonly<{
    /** Make a SQLite file that is not there (and its folder): serve and demo only. */
    create?: boolean;
  }>;

/** The configured store's URL, a SQLite path made absolute against the command's working directory (io.cwd, which tests set per run). */
export function storeUrlOf(config: Config, io: CliIo): string {
  const path = sqlitePathOf(config.store);
  return path === null ? config.store : `sqlite:${resolve(io.cwd, path)}`;
}

/**
 * Open the configured store. Only a command that owns a store (serve, demo) creates a SQLite file
 * that is not there: any other command, writing ones included, names the path it did not find,
 * or a typo in --store (or a forgotten one, the default) would start an empty store of its own.
 */
export async function openStore(config: Config, io: CliIo, { create = false, ...options }: OpenStoreOptions = {}): Promise<EventStore> {
  const url = storeUrlOf(config, io);
  const path = sqlitePathOf(url);
  if (path !== null) {
    if (create) mkdirSync(dirname(path), { recursive: true });
    else if (!existsSync(path)) {
      throw new ConvergeError(
        'CONVERGE_ERR_STORE_UNAVAILABLE',
        `store ${path} does not exist: set --store or CONVERGE_STORE to an existing one (converge serve creates a store)`,
      );
    }
  }
  const { openEventStore } = await import('../store/index.ts');
  return openEventStore(url, options);
}

/**
 * What a command reads: `past`, history that may be archived (a node's stream from its first
 * event, the log from position zero); `hot`, only what the store keeps hot (its writes' reads, its
 * statistics), so it neither reads nor needs the archive.
 */
export type StoreReads = 'past' | 'hot';

/**
 * Run `fn` with an existing store open, closing it however `fn` ends. With `--archive-dir`, its
 * reads answer over the archive too (src/store/archive/withArchive.ts); without it, on a store
 * that archived history, a read that needs archived events refuses (withoutArchive.ts).
 */
export async function withStore<T>(
  config: Config,
  io: CliIo,
  fn: (store: EventStore) => Promise<T>,
  reads: StoreReads = 'past',
): Promise<T> {
  const store = await openStore(config, io);
  try {
    return await fn(reads === 'hot' ? store : await overArchive(config, io, store));
  } finally {
    await store.close();
  }
}

/**
 * `store` with `--archive-dir` merged into its reads (its writes are the store's); without it,
 * `store` whose reads of archived history refuse, naming what was moved (docs/operations.md
 * "Retention and archive"), rather than answer from the rows kept hot alone.
 */
export async function overArchive(config: Config, io: CliIo, store: EventStore): Promise<EventStore> {
  if (config.archiveDir === null) return (await import('../store/archive/withoutArchive.ts')).withoutArchive(store);
  const { withArchive } = await import('../store/archive/withArchive.ts');
  return withArchive(store, resolve(io.cwd, config.archiveDir));
}
