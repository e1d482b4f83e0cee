import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { historyInStore } from '../support/history.ts';

// `converge --help` answers at once because it loads nothing it does not print,
// and each command loads only what it uses. These tests run the built CLI (bin/converge.js →
// dist/bundle) under a loader hook (Node 20's module.register) that writes down every module the
// process loads, and check which packages are among them: loaded from node_modules, or bundled
// in a chunk the process loaded (dist/bundle/cli/manifest.json names each chunk's packages,
// scripts/bundle.mjs). A top-level import of fastify (or of anything that imports it) in
// src/cli/main.ts makes the first test fail.

const bin = new URL('../../bin/converge.js', import.meta.url).pathname;
const bundle = new URL('../../dist/bundle/cli/', import.meta.url);
const manifest = JSON.parse(readFileSync(new URL('manifest.json', bundle), 'utf8')) as Record<string, string[]>;

const hooks = `
import { appendFileSync } from 'node:fs';
let out;
export function initialize(data) { out = data.out; }
export async function load(url, context, next) { appendFileSync(out, url + '\\n'); return next(url, context); }
`;
const registerHooks = (out: string): string =>
  `data:text/javascript,${encodeURIComponent(
    `import { register } from 'node:module'; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hooks)}`)}, { data: { out: ${JSON.stringify(out)} } });`,
  )}`;

/** The servers, brokers, store clients and edge libraries a command may or may not need. */
const heavy = ['fastify', 'amqplib', 'better-sqlite3', '@eventstore/db-client', 'zod', 'pino', 'prom-client'] as const;

let dir: string;
let traceNo = 0;

/** Run the built CLI; returns its exit code and the packages (and our own dist modules) it loaded. */
function traced(
  args: readonly string[],
  env: Record<string, string> = {},
): { code: number | null; stderr: string; packages: Set<string>; own: string[] } {
  const out = join(dir, `trace-${++traceNo}.txt`);
  const r = spawnSync(process.execPath, ['--import', registerHooks(out), bin, ...args], {
    cwd: dir,
    // TMPDIR: the demo keeps its store in a fresh dir under the OS temp dir, for the user to read afterwards.
    env: { PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: dir, ...env },
    encoding: 'utf8',
  });
  const urls = readFileSync(out, 'utf8').trim().split('\n');
  const packages = new Set<string>();
  for (const u of urls) {
    const m = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(u);
    if (m !== null) packages.add(m[1]!);
    if (u.startsWith(bundle.href)) for (const p of manifest[u.slice(bundle.href.length)] ?? []) packages.add(p);
  }
  const own = urls.filter((u) => u.includes('/dist/')).map((u) => u.slice(u.indexOf('/dist/') + 1));
  return { code: r.status, stderr: r.stderr, packages, own };
}

const loadedOf = (packages: Set<string>): string[] => heavy.filter((p) => packages.has(p));

describe('what the built converge command loads', () => {
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'converge-lazy-'));
    const store = createSqliteEventStore(join(dir, 'store.db'));
    const script = historyInStore(store);
    const a = await script.send('n1');
    await script.report('n1', { declared: a.digest, applied: ['web'] });
    await store.close();
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('converge --help loads no package at all, only the CLI itself', () => {
    const r = traced(['--help']);
    assert.equal(r.code, 0, r.stderr);
    // The hook saw the CLI load, so an empty list is a finding, not a hook that never ran.
    assert.ok(r.own.includes('dist/bundle/cli/main.js'), `trace saw: ${r.own.join(', ')}`);
    assert.deepEqual([...r.packages], []);
  });

  test('converge <command> --help loads no package for any command', () => {
    for (const command of [
      'serve',
      'demo',
      'keygen',
      'send',
      'status',
      'history',
      'state',
      'forensics',
      'replay',
      'node',
      'rollout',
      'rollouts',
    ]) {
      const r = traced([command, '--help']);
      assert.equal(r.code, 0, `${command}: ${r.stderr}`);
      assert.deepEqual([...r.packages], [], `converge ${command} --help`);
    }
  });

  test('status, state and history of one node load the SQLite adapter and the stored-event schemas, and no server, broker, other store client, logger or metrics', () => {
    const env = { CONVERGE_STORE: `sqlite:${join(dir, 'store.db')}` };
    for (const args of [['status', 'n1'], ['status'], ['history', 'n1'], ['state', 'n1', '--at', '1']]) {
      const r = traced(args, env);
      assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
      assert.deepEqual(loadedOf(r.packages), ['better-sqlite3', 'zod'], `converge ${args.join(' ')}`);
    }
  });

  test('the rollout read commands load the SQLite adapter and the stored-event schemas, and no server, broker, logger or metrics', () => {
    const env = { CONVERGE_STORE: `sqlite:${join(dir, 'store.db')}` };
    for (const args of [['rollouts'], ['rollout', 'status', 'none'], ['rollout', 'explain', 'none']]) {
      const r = traced(args, env);
      assert.equal(r.code, args[0] === 'rollouts' ? 0 : 1, `${args.join(' ')}: ${r.stderr}`);
      assert.deepEqual(loadedOf(r.packages), ['better-sqlite3', 'zod'], `converge ${args.join(' ')}`);
    }
  });

  test('the engine loads no OpenTelemetry module unless --tracing is on; on, an unreachable collector does not fail it', () => {
    // @opentelemetry/api alone is prom-client's (its exemplars), loaded with the metrics whatever tracing says.
    const otel = (packages: Set<string>): string[] =>
      [...packages].filter((p) => p.startsWith('@opentelemetry/') && p !== '@opentelemetry/api');
    const demo = ['demo', '--nodes', '2', '--rounds', '1', '--interval-ms', '200', '--port', '0'];
    const off = traced(demo, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1' });
    assert.equal(off.code, 0, off.stderr);
    assert.ok(off.packages.has('fastify'), 'the engine ran');
    assert.deepEqual(otel(off.packages), [], 'tracing off: none of OpenTelemetry, even with an endpoint set');
    const on = traced(demo, { CONVERGE_TRACING: 'on', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1' });
    assert.equal(on.code, 0, on.stderr);
    assert.ok(otel(on.packages).includes('@opentelemetry/sdk-trace-base'), otel(on.packages).join(', '));
  });

  test('a read command on an esdb:// store loads the EventStoreDB client, and not SQLite', () => {
    const r = traced(['status', 'n1'], { CONVERGE_STORE: 'esdb://127.0.0.1:1?tls=false' });
    assert.ok(r.packages.has('@eventstore/db-client'), [...r.packages].join(', '));
    assert.equal(r.packages.has('better-sqlite3'), false);
  });
});
