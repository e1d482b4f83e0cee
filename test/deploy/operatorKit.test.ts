import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { livenessStates, nodeStatuses } from '../../projections/index.ts';
import { createMetrics } from '../../src/metrics.ts';
import { describeOnService, once } from '../support/services.ts';
import { until } from '../support/until.ts';

// The operator's kit in deploy/ is only worth shipping if it matches what the engine exports:
// an alert or a panel over a metric or label the engine does not have is silent forever. So the
// rules go through promtool (syntax and their unit tests), and every metric and label the rules
// and the Grafana dashboard query is checked against a scrape of a running engine (the demo's).

const root = new URL('../..', import.meta.url).pathname;
const bin = join(root, 'bin/converge.js');
const alerts = join(root, 'deploy/prometheus/alerts.yml');

const promtool = once(async () => {
  const r = spawnSync('promtool', ['--version'], { encoding: 'utf8' });
  return r.status === 0 ? { ok: true } : { ok: false, reason: 'promtool not found (Debian package prometheus; .ci/run installs it)' };
});

type Family = { labels: Set<string> };

/** Metric families of a Prometheus text exposition, with every label name their series carry. */
function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const family = (name: string): Family => {
    let f = families.get(name);
    if (f === undefined) families.set(name, (f = { labels: new Set() }));
    return f;
  };
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)/.exec(line);
    if (type !== null) {
      family(type[1]!);
      if (type[2] === 'histogram') for (const s of ['_bucket', '_sum', '_count']) family(type[1]! + s);
      continue;
    }
    const series = /^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})?\s/.exec(line);
    if (series === null) continue;
    const f = family(series[1]!);
    for (const m of (series[2] ?? '').matchAll(/(\w+)="/g)) f.labels.add(m[1]!);
  }
  return families;
}

/** A labelled family with no series yet (nothing dead-lettered in the demo) shows no label in a scrape: take the names it is declared with. */
function withDeclaredLabels(families: Map<string, Family>): Map<string, Family> {
  for (const metric of Object.values(createMetrics())) {
    const declared = (metric as { name?: string; labelNames?: readonly string[] }) ?? {};
    if (typeof declared.name !== 'string') continue;
    for (const name of [declared.name, `${declared.name}_bucket`, `${declared.name}_sum`, `${declared.name}_count`]) {
      const f = families.get(name);
      if (f !== undefined) for (const l of declared.labelNames ?? []) f.labels.add(l);
    }
  }
  return families;
}

/** Every metric an expression selects, with the label names its matchers and groupings use. */
function usesOf(expr: string): { metric: string; labels: string[] }[] {
  const uses: { metric: string; labels: string[] }[] = [];
  const grouping = [...expr.matchAll(/\b(?:by|without)\s*\(([^)]*)\)/g)].flatMap((m) => m[1]!.split(',').map((s) => s.trim()));
  for (const m of expr.matchAll(/\b((?:converge|process|nodejs)_\w+)(\{[^}]*\})?/g)) {
    const matchers = [...(m[2] ?? '').matchAll(/(\w+)\s*(?:=~|!~|!=|=)/g)].map((x) => x[1]!);
    uses.push({ metric: m[1]!, labels: [...matchers, ...grouping].filter((l) => l !== '' && l !== 'le' && l !== 'job') });
  }
  return uses;
}

/** The label values the queries compare against, where the engine's own lists say what is possible. */
function checkValues(expr: string, where: string): void {
  for (const m of expr.matchAll(/\b(status|liveness)\s*=~?\s*"([^"]*)"/g)) {
    const known: readonly string[] = m[1] === 'status' ? nodeStatuses : livenessStates;
    for (const v of m[2]!.split('|')) assert.ok(known.includes(v), `${where}: ${m[1]}="${v}" is not one of ${known.join(', ')}`);
  }
}

describeOnService('promtool', promtool, 'deploy/prometheus', () => {
  test('the alert rules pass promtool check rules', () => {
    const r = spawnSync('promtool', ['check', 'rules', alerts], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stdout + r.stderr);
  });
  test('the alert rules pass their unit tests (promtool test rules)', () => {
    const r = spawnSync('promtool', ['test', 'rules', join(root, 'deploy/prometheus/alerts.test.yml')], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stdout + r.stderr);
  });
});

const systemdAnalyze = once(async () => {
  const r = spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' });
  return r.status === 0 ? { ok: true } : { ok: false, reason: 'systemd-analyze not found (Debian package systemd)' };
});

describeOnService('systemd-analyze', systemdAnalyze, 'deploy/systemd', () => {
  test('the unit file passes systemd-analyze verify', () => {
    const r = spawnSync('systemd-analyze', ['verify', join(root, 'deploy/systemd/converge.service')], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.equal(r.stderr.trim(), '', 'no warning about the unit');
  });
});

const work = mkdtempSync(join(tmpdir(), 'converge-kit-'));
let exposition = new Map<string, Family>();
let demo: ReturnType<typeof spawn> | null = null;

before(async () => {
  demo = spawn(process.execPath, [bin, 'demo', '--port', '0', '--interval-ms', '500'], {
    cwd: work,
    stdio: ['ignore', 'ignore', 'pipe'],
    // TMPDIR: the demo keeps its store in a fresh dir under the OS temp dir, for the user to read afterwards.
    env: { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CONVERGE_'))), TMPDIR: work },
  });
  let err = '';
  demo.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  await until('the demo to print its API address', () => /API (http:\/\/\S+)/.test(err), { timeoutMs: 60_000 });
  const url = /API (http:\/\/\S+)/.exec(err)![1]!;
  // Scrape once the fleet has folded a report that converged, so the histogram has observations too.
  await until(
    'a scrape with a converged node and a convergence sample',
    async () => {
      const text = await (await fetch(`${url}/metrics`)).text();
      exposition = withDeclaredLabels(parseExposition(text));
      return /converge_nodes\{status="converged"/.test(text) && /converge_convergence_seconds_count [1-9]/.test(text);
    },
    { timeoutMs: 60_000 },
  );
});
after(() => {
  demo?.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
});

test('every metric and label the alert rules query is one the engine exports', () => {
  const exprs = [...readFileSync(alerts, 'utf8').matchAll(/^\s*expr:\s*(.+)$/gm)].map((m) => m[1]!);
  assert.ok(exprs.length >= 8, 'the rules file has its alerts');
  for (const expr of exprs) {
    checkValues(expr, expr);
    for (const use of usesOf(expr)) {
      const f = exposition.get(use.metric);
      assert.ok(f !== undefined, `alerts.yml queries ${use.metric}, which the engine does not export`);
      for (const l of use.labels)
        assert.ok(f.labels.has(l), `alerts.yml uses label ${l} of ${use.metric}; it has ${[...f.labels].join(', ') || 'none'}`);
    }
  }
});

test('every metric and label each Grafana panel queries is one the engine exports', () => {
  const dashboard = JSON.parse(readFileSync(join(root, 'deploy/grafana/converge.json'), 'utf8')) as {
    panels: { title: string; targets: { expr: string }[] }[];
    templating: { list: { query?: unknown }[] };
  };
  assert.ok(dashboard.panels.length >= 10, 'the dashboard has its panels');
  for (const panel of dashboard.panels) {
    assert.ok(panel.targets.length > 0, `${panel.title} queries something`);
    for (const { expr } of panel.targets) {
      checkValues(expr, panel.title);
      const uses = usesOf(expr);
      assert.ok(uses.length > 0, `${panel.title}: ${expr} names a metric`);
      for (const use of uses) {
        const f = exposition.get(use.metric);
        assert.ok(f !== undefined, `panel "${panel.title}" queries ${use.metric}, which the engine does not export`);
        for (const l of use.labels)
          assert.ok(
            f.labels.has(l),
            `panel "${panel.title}" uses label ${l} of ${use.metric}; it has ${[...f.labels].join(', ') || 'none'}`,
          );
      }
    }
  }
});
