import { parseArgs } from 'node:util';
import { runNodeCommand } from '../accounts/nodeCommand.ts';
import { configFlags, configHelp, loadConfig } from '../app/config.ts';
import { isConvergeError, toConvergeError } from '../errors.ts';
import { ConvergeError } from '../errors.ts';
import type { Command, Options } from './command.ts';
import { makeLogger } from './command.ts';
import { demo } from './commands/demo.ts';
import { forensics } from './commands/forensics.ts';
import { history } from './commands/history.ts';
import { keygen } from './commands/keygen.ts';
import { replay } from './commands/replay.ts';
import { send } from './commands/send.ts';
import { serve } from './commands/serve.ts';
import { state } from './commands/state.ts';
import { status } from './commands/status.ts';
import { processIo } from './io.ts';
import type { CliIo } from './io.ts';

// The `converge` command (DESIGN §7). Exit status: 0 ok; 1 a failure with a one-line reason on
// stderr (several lines only for configuration, one per mistake); 2 a usage mistake.

export const commands: readonly Command[] = [serve, demo, keygen, send, status, history, state, forensics, replay];

const shared: Options = {
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  ...Object.fromEntries(configFlags.map((f) => [f, { type: f === 'trust-missing-user-id' ? 'boolean' : 'string' } as const])),
};

const mainHelp = (): string =>
  [
    'usage: converge <command> [flags]',
    '',
    'commands:',
    ...commands.map((c) => `  ${c.name.padEnd(10)} ${c.summary}`),
    `  ${'node'.padEnd(10)} enroll <id> | revoke <id>: a node's broker account, scoped to what wire.go lets it say`,
    '',
    'every command takes --help and --json; configuration flags (and their variables):',
    ...configHelp.map((h) => `  ${h}`),
    '',
  ].join('\n');

const commandHelp = (c: Command): string =>
  [`usage: ${c.usage}`, '', c.summary, '', 'configuration flags (and their variables):', ...configHelp.map((h) => `  ${h}`), ''].join('\n');

export async function run(argv: readonly string[], io: CliIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    io.stdout(mainHelp());
    return name === undefined ? 2 : 0;
  }
  if (name === 'node') {
    // Broker accounts talk to RabbitMQ's management API, not the store: own flags, own help.
    return runNodeCommand(rest, { stdout: (l) => io.stdout(`${l}\n`), stderr: (l) => io.stderr(`${l}\n`), env: io.env });
  }
  const command = commands.find((c) => c.name === name);
  try {
    if (command === undefined)
      throw new ConvergeError('CONVERGE_ERR_USAGE', `unknown command ${JSON.stringify(name)}; run converge --help`);
    let parsed: ReturnType<typeof parseArgs>;
    try {
      parsed = parseArgs({ args: [...rest], options: { ...shared, ...command.options }, allowPositionals: true, strict: true });
    } catch (e) {
      throw new ConvergeError('CONVERGE_ERR_USAGE', `${name}: ${(e as Error).message.split('\n')[0] ?? ''}`);
    }
    const values = parsed.values as Record<string, string | boolean | undefined>;
    if (values.help === true) {
      io.stdout(commandHelp(command));
      return 0;
    }
    const [min, max] = command.args;
    if (parsed.positionals.length < min || parsed.positionals.length > max) {
      throw new ConvergeError(
        'CONVERGE_ERR_USAGE',
        `${name}: expected ${min === max ? min : `${min} to ${max}`} argument(s), got ${parsed.positionals.length}; usage: ${command.usage}`,
      );
    }
    const config = loadConfig({ flags: values, env: io.env }, { logLevel: command.defaultLogLevel ?? 'warn' });
    const logger = makeLogger(config.logLevel);
    return await command.run({ io, values, positionals: parsed.positionals, config, json: values.json === true, logger });
  } catch (err) {
    const e = toConvergeError(err);
    const lines =
      isConvergeError(e, 'CONVERGE_ERR_CONFIG_INVALID') && Array.isArray(e.details?.lines)
        ? (e.details.lines as string[])
        : [e.message.split('\n')[0] ?? e.code];
    for (const line of lines) io.stderr(`converge: ${line}\n`);
    if (e.code === 'CONVERGE_ERR_INTERNAL' && io.env['CONVERGE_DEBUG'] !== undefined) io.stderr(`${(err as Error).stack ?? ''}\n`);
    return e.code === 'CONVERGE_ERR_USAGE' ? 2 : 1;
  }
}

/** Entry point for bin/converge.js. */
export async function main(): Promise<void> {
  const code = await run(process.argv.slice(2), processIo());
  process.exitCode = code;
  // Long-running commands leave handles (sockets, timers) behind on purpose only until they stop.
  if (code !== 0) setTimeout(() => process.exit(code), 100).unref();
}
