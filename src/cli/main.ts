import { configKeys, settingHelp, settings } from '../app/settings.ts';
import { ConvergeError, isConvergeError, toConvergeError } from '../core/errors.ts';
import type { ErrorCode } from '../core/errors.ts';
import { closest, parseCommandLine } from './args.ts';
import type { Flag } from './args.ts';
import type { CommandSpec, FlagHelp } from './command.ts';
import { commands } from './commands/index.ts';
import { processIo } from './io.ts';
import type { CliIo } from './io.ts';

// The `converge` command (docs/design.md §7). This file and what it imports statically are all that
// `converge --help` loads: command metadata, the settings table and the argument reader. A
// command's code, the configuration's validation and any store, broker or server are imported
// when a command runs (test/cli/lazyImports.test.ts holds it to that).

export { commands };

/** One rule for every command: 2 for a usage mistake, 1 for a command that failed. */
// A read that needs the archive it was not given is fixed on the command line, as a usage error is.
const usageCodes: ReadonlySet<ErrorCode> = new Set([
  'CONVERGE_ERR_USAGE',
  'CONVERGE_ERR_CONFIG_INVALID',
  'CONVERGE_ERR_NODE_ID_INVALID',
  'CONVERGE_ERR_ARCHIVE_NEEDED',
]);
export const exitCodeOf = (code: ErrorCode): 1 | 2 => (usageCodes.has(code) ? 2 : 1);

const exitStatusHelp = [
  'exit status: 0 done · 1 the command failed (one line on stderr says why) ·',
  '             2 a usage mistake: unknown command or flag, a missing or malformed argument, flag or setting (nothing was done)',
];

const formats = ['json', 'yaml', 'wide', 'name'] as const;
type Format = (typeof formats)[number];

/** Read commands also take -o (kubectl's habit); --json stays, as -o json. */
const outputFlag: Readonly<Record<string, FlagHelp>> = {
  output: {
    type: 'string',
    short: 'o',
    value: formats.join('|'),
    help: 'json (as --json), yaml, wide (more columns) or name (one id a line)',
  },
};

const outputOf = (values: Readonly<Record<string, string | boolean | undefined>>): Format | 'text' => {
  const o = values.output;
  if (o === undefined) return values.json === true ? 'json' : 'text';
  if (!(formats as readonly unknown[]).includes(o)) {
    throw new ConvergeError('CONVERGE_ERR_USAGE', `-o must be one of ${formats.join(', ')}, got ${JSON.stringify(o)}`);
  }
  if (values.json === true && o !== 'json')
    throw new ConvergeError('CONVERGE_ERR_USAGE', `--json is -o json: it cannot go with -o ${o as string}`);
  return o as Format;
};

const shared: Readonly<Record<string, FlagHelp>> = {
  json: { type: 'boolean', help: 'JSON for programs: one object, or one object a line for lists' },
  config: {
    type: 'string',
    value: '<file>',
    help: 'a YAML file of settings, keyed like the flags (grace-ms: 60000); flags and variables win over it. Or CONVERGE_CONFIG',
  },
  help: { type: 'boolean', short: 'h', help: 'this help' },
};

/** Every configuration flag, on every command: one set of flags (like one set of variables) serves them all. */
const configFlags: Readonly<Record<string, Flag>> = Object.fromEntries(
  configKeys.map((k) => [settings[k].flag, { type: 'string', value: settings[k].value } satisfies Flag]),
);

/** Every flag a command takes: the configuration flags, --json and --help, -o on read commands, its own. */
export const flagsOf = (command: CommandSpec): Readonly<Record<string, Flag>> => ({
  ...configFlags,
  ...shared,
  ...(command.output === true ? outputFlag : {}),
  ...command.flags,
});

const mainHelp = (): string =>
  [
    'usage: converge <command> [arguments] [flags]',
    '       converge --version',
    '',
    'commands:',
    ...commands.map((c) => `  ${c.name.padEnd(10)} ${c.summary}`),
    '',
    'converge <command> --help says what each takes. Every command takes --json, --help and these',
    'configuration flags [variable, default]; a flag overrides its variable, and a command checks only',
    'the settings it uses:',
    ...configKeys.map((k) => `  ${settingHelp(k)}`),
    '',
    ...exitStatusHelp,
    '',
  ].join('\n');

const flagLine = (name: string, f: FlagHelp): string => {
  const left = `${f.short === undefined ? '    ' : `-${f.short}, `}--${name}${f.type === 'string' ? ` ${f.value ?? '<value>'}` : ''}`;
  return `  ${left.padEnd(32)} ${f.help}`;
};

const commandHelp = (c: CommandSpec): string =>
  [
    `usage: ${c.usage}`,
    '',
    c.summary,
    '',
    'flags:',
    ...Object.entries({ ...c.flags, ...(c.output === true ? outputFlag : {}), ...shared }).map(([name, f]) => flagLine(name, f)),
    ...(c.settings.length === 0
      ? ['', 'it reads no configuration setting.']
      : [
          '',
          'settings it uses [variable, default]:',
          ...c.settings.map((k) => `      ${settingHelp(k, 28, c.settingDefaults?.[k] ?? settings[k].default)}`),
        ]),
    '',
    'The other configuration flags of converge --help are accepted and ignored.',
    ...exitStatusHelp,
    '',
  ].join('\n');

export async function run(argv: readonly string[], io: CliIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    io.stdout(mainHelp());
    return name === undefined ? 2 : 0;
  }
  if (name === '--version') {
    const { buildInfo, versionLine } = await import('./version.ts');
    const info = buildInfo();
    io.stdout(rest.includes('--json') || rest.join(' ') === '-o json' ? `${JSON.stringify(info)}\n` : versionLine(info));
    return 0;
  }
  try {
    const command = commands.find((c) => c.name === name);
    if (command === undefined) {
      const guess = closest(
        name,
        commands.map((c) => c.name),
      );
      throw new ConvergeError(
        'CONVERGE_ERR_USAGE',
        `unknown command ${JSON.stringify(name)}${guess === null ? '' : `; did you mean ${guess}?`} (converge --help lists them)`,
      );
    }
    const { values, positionals } = parseCommandLine(name, rest, flagsOf(command));
    if (values.help === true) {
      io.stdout(commandHelp(command));
      return 0;
    }
    const output = outputOf(values);
    const [min, max] = command.args;
    if (positionals.length < min || positionals.length > max) {
      const expected = min === max ? `${min}` : `${min} to ${max}`;
      throw new ConvergeError(
        'CONVERGE_ERR_USAGE',
        `${name} takes ${expected} argument(s), got ${positionals.length}${
          positionals.length > max
            ? ` (${positionals
                .slice(max)
                .map((p) => JSON.stringify(p))
                .join(', ')} too many)`
            : ''
        }; usage: ${command.usage.split('\n')[0]}`,
      );
    }
    const [{ loadConfig }, { readConfigFile }, { run: runCommand }] = await Promise.all([
      import('../app/config.ts'),
      import('../app/configFile.ts'),
      command.load(),
    ]);
    const configPath = typeof values.config === 'string' ? values.config : io.env['CONVERGE_CONFIG'];
    const file = configPath === undefined || configPath === '' ? {} : readConfigFile(configPath, io.cwd);
    const overrides = { logLevel: command.defaultLogLevel ?? 'warn' };
    const config = loadConfig({ flags: values, env: io.env, file }, overrides, command.settings);
    return await runCommand({ io, values, positionals, config, output, json: output === 'json', file, overrides });
  } catch (err) {
    const e = toConvergeError(err);
    const lines =
      isConvergeError(e, 'CONVERGE_ERR_CONFIG_INVALID') && Array.isArray(e.details?.lines)
        ? (e.details.lines as string[])
        : [e.message.split('\n')[0] ?? e.code];
    for (const line of lines) io.stderr(`converge: ${line}\n`);
    if (e.code === 'CONVERGE_ERR_INTERNAL' && io.env['CONVERGE_DEBUG'] !== undefined) io.stderr(`${(err as Error).stack ?? ''}\n`);
    return exitCodeOf(e.code);
  }
}

/** Entry point for bin/converge.js. */
export async function main(): Promise<void> {
  const code = await run(process.argv.slice(2), processIo());
  process.exitCode = code;
  // Long-running commands leave handles (sockets, timers) behind on purpose only until they stop.
  if (code !== 0) setTimeout(() => process.exit(code), 100).unref();
}
