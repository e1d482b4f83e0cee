import { generateKeyPairSync, randomBytes } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseApiTokens } from '../../api/auth.ts';
import { loadConfig } from '../../app/config.ts';
import type { Config } from '../../app/config.ts';
import { createDemo } from '../../app/demo.ts';
import { generateSigningKey } from '../../core/declaration/index.ts';
import { sleep } from '../../retry.ts';
import { ConvergeError } from '../../core/errors.ts';
import type { Run } from '../command.ts';
import { openStore, sqliteFileOf } from '../command.ts';
import type { CliIo } from '../io.ts';
import { makeLogger } from '../logger.ts';
import { printJson } from '../output.ts';

// `converge demo` (docs/design.md §6): the demo fleet of src/app/demo.ts on embedded defaults, rounds of
// declarations every --interval-ms, and a summary line a second (or JSON lines with --json).

const int = (v: string | boolean | undefined, fallback: number, name: string): number => {
  if (v === undefined) return fallback;
  const n = Number(v);
  if (typeof v !== 'string' || !Number.isInteger(n) || n < 0)
    throw new ConvergeError('CONVERGE_ERR_USAGE', `--${name} must be a whole number ≥ 0`);
  return n;
};

export const run: Run = async ({ io, values, config: given, json }) => {
  const count = Math.max(5, int(values.nodes, 50, 'nodes'));
  const rounds = values.rounds === undefined ? null : int(values.rounds, 0, 'rounds');
  const duration = values.duration === undefined ? null : int(values.duration, 0, 'duration');
  const intervalMs = Math.max(100, int(values['interval-ms'], 3_000, 'interval-ms'));

  // Embedded defaults: a fresh SQLite file in a temp dir (each demo starts clean), a short grace
  // so the silent node is seen going away within the demo, and a token printed for the API.
  const explicitStore = values.store !== undefined || io.env['CONVERGE_STORE'] !== undefined;
  const dir = explicitStore ? null : mkdtempSync(join(tmpdir(), 'converge-demo-'));
  const config = loadConfig(
    { flags: { ...values, ...(dir === null ? {} : { store: `sqlite:${join(dir, 'converge.db')}` }) }, env: io.env },
    {
      logLevel: 'warn',
      graceMs: String(Math.max(3 * 1000, intervalMs)),
      lastSeenFlushMs: '1000',
      trustMissingUserId: given.amqpUrl === null ? 'off' : 'on',
      // Signed checkpoints often enough that a tour's evidence bundle finds one (docs/audit.md).
      checkpointEveryMs: '10000',
    },
  );
  let tokens = config.apiTokens;
  let token: string | null = null;
  if (tokens.size === 0) {
    token = randomBytes(18).toString('base64url');
    tokens = parseApiTokens(`${token}:read,send`).table;
  }
  const key = config.signingKey ?? generateSigningKey();
  const logger = makeLogger(config.logLevel);
  const store = await openStore(config, io, { create: true });
  const audit = demoAuditKey(config, io);
  const demo = await createDemo({
    config: { ...config, apiTokens: tokens, auditKey: audit.key, witnessDir: config.witnessDir ?? audit.witness },
    logger,
    store,
    key,
    nodes: count,
    intervalMs,
  });
  const { cast } = demo;

  let round = 0;
  const url = await demo.start();
  const where = dir === null ? config.store : `sqlite:${join(dir, 'converge.db')}`;
  io.stderr(
    [
      `converge demo: ${count} nodes (${cast.slow.length} slow, ${cast.refusing} refuses, ${cast.degraded} degraded, ${cast.silent} goes silent) on ${config.amqpUrl === null ? 'the in-process broker' : 'RabbitMQ'}`,
      ...(demo.server.dashboard ? [`dashboard ${url}/  (paste the token below when it asks)`] : []),
      `API ${url}  (Authorization: Bearer ${token ?? '<one of CONVERGE_API_TOKENS>'})  OpenAPI ${url}/v1/openapi.json`,
      // `converge` is on the PATH only after `npm link`; npx finds it in this project either way.
      `store ${where}   afterwards: npx converge forensics races --store ${where}`,
      ...(audit.pub === null
        ? []
        : [`audit: checkpoints signed every ${config.checkpointEveryMs / 1000} s, public key ${audit.pub}, witness ${audit.witness}`]),
      '',
    ].join('\n'),
  );

  const summary = (): Record<string, unknown> => ({ round, ...demo.summary() });
  const line = (s: Record<string, unknown>): string =>
    `round ${String(s.round)}${rounds === null ? '' : `/${rounds}`}  behind ${String(s.behind)}  converged ${String(s.converged)}  degraded ${String(s.degraded)}  refused ${String(s.refused)}  |  connected ${String(s.connected)}  disconnected ${String(s.disconnected)}  |  races ${String(s.races)}  p50 ${String(s.p50Ms ?? '-')} ms`;
  const show = (): void => {
    const s = summary();
    if (json) printJson(io, s);
    else io.stdout(io.stderrIsTTY ? `\r${line(s)}\u001b[K` : `${line(s)}\n`);
  };

  const started = Date.now();
  const ticker = setInterval(show, 1_000);
  // One signal ends every wait: a timer left running would hold the process until it fired, a
  // whole --interval-ms after Ctrl-C.
  const stopping = new AbortController();
  void io.interrupted.then(() => {
    if (!stopping.signal.aborted) io.stderr(`${io.stderrIsTTY ? '\n' : ''}converge demo: stopping…\n`);
    stopping.abort();
  });
  const durationTimer = duration === null ? null : setTimeout(() => stopping.abort(), duration);
  try {
    while (!stopping.signal.aborted && (rounds === null || round < rounds)) {
      round++;
      await demo.sendRound(round);
      await sleep(intervalMs, stopping.signal);
    }
    // Let the last round land (the slow nodes need 1.5 intervals) unless the user stopped us: then
    // until every node but the silent one has answered it, for at most a minute more, so the
    // summary counts the same on a loaded machine as on a quiet one.
    if (!stopping.signal.aborted) await sleep(intervalMs * 2, stopping.signal);
    const settleBy = Date.now() + 60_000;
    while (rounds !== null && !stopping.signal.aborted && !demo.settled() && Date.now() < settleBy) await sleep(100, stopping.signal);
    clearInterval(ticker);
    const final = summary();
    if (json) printJson(io, { final: true, ...final, elapsedMs: Date.now() - started });
    else io.stdout(`${io.stderrIsTTY ? '\r' : ''}${line(final)}\n`);
    const silent = demo.silentState();
    if (silent !== null && !json) io.stderr(`${cast.silent}: ${silent.status}, ${silent.liveness}\n`);
  } finally {
    clearInterval(ticker);
    if (durationTimer !== null) clearTimeout(durationTimer);
    await demo.stop();
    await store.close();
  }
  return 0;
};

/**
 * The demo signs checkpoints of its log as an engine with --audit-key does: with the key it was
 * given, or one made for this run whose public half is written beside the SQLite file, so that
 * `converge audit export` and `audit check` work on the demo's store (the README's tour).
 */
function demoAuditKey(config: Config, io: CliIo): { key: KeyObject | null; pub: string | null; witness: string | null } {
  if (config.auditKey !== null) return { key: config.auditKey, pub: null, witness: null };
  const file = sqliteFileOf(config, io);
  if (file === null) return { key: null, pub: null, witness: null };
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const pub = `${file}.audit.pub`;
  writeFileSync(pub, publicKey.export({ format: 'pem', type: 'spki' }));
  return { key: privateKey, pub, witness: `${file}.witness` };
}
