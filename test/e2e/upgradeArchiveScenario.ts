import { execFile } from 'node:child_process';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateSigningKey, signingKeyToPem } from '../../src/core/declaration/index.ts';
import { openEventStore } from '../../src/store/index.ts';
import { historyInStore } from '../support/history.ts';
import type { PreviousRelease } from '../support/previousRelease.ts';
import { startServe, thisBin } from '../support/serveProcess.ts';
import { until } from '../support/until.ts';

// An upgrade over an archive (docs/operations.md "Upgrades", "Retention and archive"), on one
// store (a SQLite file, or a PostgreSQL schema) and one archive folder. The previous release sends
// declarations and retires a node on a clock set 40 days back (a preloaded Date, so `store archive
// --older-than 30d` has history to move), stops its serve (the snapshot and a signed checkpoint)
// and archives. Reports and liveness transitions, which only ingest writes, come from the test's
// history helper, the same event makers. Then this release answers the reads of the archived past
// as the previous one did; then it sends more on a clock 35 days back and archives again, a segment
// reaching below the first one's last position, and the previous release reads that archive and
// answers as this one does.

const day = 86_400_000;
const nodes = ['n1', 'n2', 'n3'];

export type UpgradeArchiveResult = { notes: string[]; checks: Record<string, boolean> };
type Run = Readonly<{ code: number; stdout: string; stderr: string }>;

/** Date shifted by UPGRADE_CLOCK_OFFSET_MS, for a process started with --import of this file. */
const shiftedClock = `
const offset = Number(process.env.UPGRADE_CLOCK_OFFSET_MS ?? '0');
const Real = Date;
globalThis.Date = class extends Real {
  constructor(...a) { if (a.length === 0) super(Real.now() + offset); else super(...a); }
  static now() { return Real.now() + offset; }
};
`;

/**
 * The scenario on `storeUrl`: a SQLite file in `dir` unless given (a `postgres://…?schema=…` URL
 * names a schema the caller made room for and drops).
 */
export async function runUpgradeArchive(
  release: PreviousRelease,
  dir: string,
  storeUrl = `sqlite:${join(dir, 'fleet.db')}`,
): Promise<UpgradeArchiveResult> {
  const notes: string[] = [];
  const checks: Record<string, boolean> = {};
  // A PostgreSQL store has no snapshot beside it: every command names the one serve writes, so
  // serve restores it, `store archive` moves only what lies below it and `replay --verify` checks it.
  const snapshot = /^postgres(ql)?:\/\//.test(storeUrl) ? ['--snapshot', join(dir, 'fleet.snapshot')] : [];
  const store = ['--store', storeUrl, ...snapshot];
  const archive = ['--archive-dir', join(dir, 'archive')];
  const keyPath = join(dir, 'signing.pem');
  writeFileSync(keyPath, signingKeyToPem(generateSigningKey()), { mode: 0o600 });
  const specPath = join(dir, 'spec.json');
  const clockPath = join(dir, 'clock.mjs');
  writeFileSync(clockPath, shiftedClock);
  const base: NodeJS.ProcessEnv = { ...process.env };
  for (const k of Object.keys(base)) if (k.startsWith('CONVERGE_')) delete base[k];

  const cli = (bin: string, args: readonly string[], daysBack = 0): Promise<Run> =>
    new Promise((resolve) => {
      const pre = daysBack === 0 ? [] : ['--import', clockPath];
      const env = { ...base, UPGRADE_CLOCK_OFFSET_MS: String(-daysBack * day) };
      execFile(process.execPath, [...pre, bin, ...args], { env, cwd: dir }, (err, stdout, stderr) =>
        resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, stdout, stderr }),
      );
    });
  const must = async (bin: string, args: readonly string[], daysBack = 0): Promise<string> => {
    const r = await cli(bin, args, daysBack);
    if (r.code !== 0)
      throw new Error(
        `${bin === thisBin ? 'this release' : 'the previous release'}: converge ${args.join(' ')} exited ${r.code}: ${r.stderr}`,
      );
    return r.stdout;
  };
  const send = async (bin: string, node: string, image: string, daysBack: number) => {
    writeFileSync(specPath, JSON.stringify({ resources: [{ id: 'web', image }] }));
    return JSON.parse(await must(bin, ['send', node, specPath, '--signing-key', keyPath, ...store, '--json'], daysBack)) as {
      digest: string;
      position: string;
    };
  };
  /** What ingest would append after the sends: each node's report of `digests`, then a silence and its end. */
  const ingest = async (digests: Readonly<Record<string, string>>, daysBack: number): Promise<void> => {
    const s = await openEventStore(storeUrl);
    const h = historyInStore(s, Date.now() - daysBack * day);
    for (const [node, declared] of Object.entries(digests)) {
      h.tick(30_000);
      await h.report(node, { declared, applied: ['web'] });
    }
    for (const node of Object.keys(digests)) {
      h.tick(60_000);
      const last = h.now().getTime();
      h.tick(120_000);
      await h.silent(node, last, 60_000);
      h.tick(60_000);
      await h.heard(node, last);
    }
    await s.close();
  };
  /**
   * A serve of `bin` on the store, stopped once it has folded it: the snapshot and a signed
   * checkpoint, as an operator's stop leaves them. Whether it restored the snapshot there was.
   */
  const serveAndStop = async (bin: string): Promise<boolean> => {
    const e = startServe(['serve', '--port', '0', ...store, '--audit-key', join(dir, 'audit', 'audit.key')], {}, bin);
    try {
      const url = await e.url;
      await until('the engine ready', async () => (await fetch(`${url}/readyz`)).status === 200, 60_000).catch((err: Error) => {
        throw new Error(`${err.message}: ${e.stderr().slice(-1500)}`);
      });
      const code = await e.stop();
      if (code !== 0) throw new Error(`serve exited ${code}: ${e.stderr().slice(-1000)}`);
      return e.logged(/restored read model from snapshot/) !== undefined;
    } finally {
      await e.kill();
    }
  };
  const archiveRun = async (bin: string): Promise<{ segments: number; events: number; files: string[] }> =>
    JSON.parse(await must(bin, ['store', 'archive', '--older-than', '30d', ...archive, ...store, '--json']));

  /**
   * `replay --verify` against the snapshot the last serve wrote. The previous release refuses, by
   * name, a snapshot of a newer format than it reads (docs/operations.md "Upgrades"): that refusal
   * is noted, and it verifies the store with the snapshot set aside instead (a fold against a fold).
   */
  const replayVerify = async (bin: string): Promise<string> => {
    const args = ['replay', '--verify', '--json', ...store, ...archive];
    const r = await cli(bin, args);
    const newer = /snapshot is format (\d+); this engine reads format (\d+)/.exec(r.stderr);
    if (r.code === 0 || bin === thisBin || newer === null || Number(newer[1]) <= Number(newer[2])) return must(bin, args);
    checks['thePreviousReleaseRefusesTheNewerSnapshotByName'] = true;
    notes.push(`the previous release refused this one's snapshot: ${newer[0]}`);
    const path = snapshot.length > 0 ? snapshot[1]! : `${storeUrl.slice('sqlite:'.length)}.snapshot`;
    renameSync(path, `${path}.aside`);
    try {
      return await must(bin, ['replay', '--verify', '--json', '--store', storeUrl, ...archive]);
    } finally {
      renameSync(`${path}.aside`, path);
    }
  };
  /** The reads of the past each release answers, as text: `at` the nodes' states asked, the first n1's, which is exported to `out`. */
  const reads = async (bin: string, at: readonly (readonly [string, string])[], out: string): Promise<Record<string, string>> => {
    const answers: Record<string, string> = {};
    for (const node of nodes) answers[`history ${node}`] = await must(bin, ['history', node, '--json', ...store, ...archive]);
    for (const [node, moment] of at)
      answers[`state ${node} --at ${moment}`] = await must(bin, ['state', node, '--at', moment, '--json', ...store, ...archive]);
    answers['replay --verify'] = await replayVerify(bin);
    const pub = ['--audit-pub', join(dir, 'audit', 'audit.pub')];
    answers['audit verify'] = await must(bin, ['audit', 'verify', '--json', ...pub, ...store, ...archive]);
    const exported = JSON.parse(
      await must(bin, ['audit', 'export', 'n1', '--at', at[0]![1], '--out', out, ...pub, ...store, ...archive, '--json']),
    ) as Record<string, unknown>;
    delete exported['out'];
    answers['audit export n1'] = JSON.stringify(exported);
    answers['audit check'] = (await must(bin, ['audit', 'check', out, ...pub, '--json'])).replace(out, '<bundle>');
    return answers;
  };
  // replay --verify's `against` names what it compared with: a fold when the snapshot was set aside.
  const verdict = (k: string, answer: string): string => (k === 'replay --verify' ? answer.replace(/"against":"[^"]*",?/, '') : answer);
  const same = (a: Record<string, string>, b: Record<string, string>): string[] =>
    Object.keys(a)
      .filter((k) => verdict(k, a[k]!) !== verdict(k, b[k]!))
      .map((k) => `${k}: ${a[k]!.slice(0, 300)} / ${b[k]!.slice(0, 300)}`);

  // The previous release writes the history, 40 and 39 days back, and archives it.
  await must(release.bin, ['keygen', '--audit', join(dir, 'audit')]);
  await serveAndStop(release.bin); // serve makes the store
  const first: Record<string, { digest: string; position: string }> = {};
  for (const node of nodes) first[node] = await send(release.bin, node, 'web:1', 40);
  await ingest(Object.fromEntries(nodes.map((n) => [n, first[n]!.digest])), 40);
  const second = { n1: await send(release.bin, 'n1', 'web:2', 39), n2: await send(release.bin, 'n2', 'web:2', 39) };
  await ingest({ n1: second.n1.digest, n2: second.n2.digest }, 39);
  await must(release.bin, ['node', 'retire', 'n3', '--reason', 'decommissioned', ...store], 39);
  await serveAndStop(release.bin);
  const oldRun = await archiveRun(release.bin);
  checks['thePreviousReleaseArchived'] = oldRun.segments > 0 && oldRun.events > 0;
  notes.push(`the previous release archived ${oldRun.events} events into ${oldRun.files.join(', ')}`);
  await send(release.bin, 'n1', 'web:3', 0);

  // This release reads what the previous one archived, and answers as it did.
  const between = new Date(Date.now() - 39.5 * day).toISOString();
  const moments = [
    ['n1', first.n1!.position],
    ['n2', between],
    ['n3', between],
  ] as const;
  const oldAnswers = await reads(release.bin, moments, join(dir, 'old-1.json'));
  const newAnswers = await reads(thisBin, moments, join(dir, 'new-1.json'));
  const differ = same(oldAnswers, newAnswers);
  checks['thisReleaseAnswersAsThePreviousDid'] = differ.length === 0;
  if (differ.length > 0) notes.push(`over the previous release's archive: ${differ.join('; ')}`);
  checks['eachChecksTheOthersBundle'] =
    (await cli(thisBin, ['audit', 'check', join(dir, 'old-1.json'), '--audit-pub', join(dir, 'audit', 'audit.pub')])).code === 0 &&
    (await cli(release.bin, ['audit', 'check', join(dir, 'new-1.json'), '--audit-pub', join(dir, 'audit', 'audit.pub')])).code === 0;
  // The same bundle but for the moment each was made.
  const bundle = (name: string): string => readFileSync(join(dir, name), 'utf8').replace(/"exportedAt":"[^"]*"/, '');
  checks['theBundlesAreTheSame'] = bundle('old-1.json') === bundle('new-1.json');

  // This release sends more 35 days back and archives: the rows the first run kept hot go too, below its last position.
  const third = { n1: await send(thisBin, 'n1', 'web:4', 35), n2: await send(thisBin, 'n2', 'web:3', 35) };
  await ingest({ n1: third.n1.digest, n2: third.n2.digest }, 35);
  // Its start restores the previous release's snapshot over the archived store, the archive not read.
  checks['thisReleaseRestoredThePreviousSnapshot'] = await serveAndStop(thisBin);
  const newRun = await archiveRun(thisBin);
  checks['thisReleaseArchived'] = newRun.segments > 0 && newRun.events > 0;
  notes.push(`this release archived ${newRun.events} more events into ${newRun.files.join(', ')}`);

  // The previous release reads this one's archive and answers as this one does.
  const later = [...moments, ['n1', second.n1.position], ['n2', new Date(Date.now() - 34.9 * day).toISOString()]] as const;
  const newLater = await reads(thisBin, later, join(dir, 'new-2.json'));
  const oldLater = await reads(release.bin, later, join(dir, 'old-2.json'));
  const differLater = same(newLater, oldLater);
  checks['thePreviousReleaseAnswersAsThisDoes'] = differLater.length === 0;
  if (differLater.length > 0) notes.push(`over this release's archive: ${differLater.join('; ')}`);
  checks['theArchiveIsIntact'] = /"intact":true/.test(oldLater['audit verify']!) && /"intact":true/.test(newLater['audit verify']!);
  // The answers come from the archive: without it this release refuses each node's history (it
  // needs archived events, docs/operations.md "Reads without the archive") rather than answer from
  // the rows kept hot.
  const hotOnly = await Promise.all(nodes.map((n) => cli(thisBin, ['history', n, '--json', ...store])));
  checks['theArchivedHistoryIsRead'] = hotOnly.every((r) => r.code === 2 && /give --archive-dir/.test(r.stderr));
  if (!checks['theArchivedHistoryIsRead'])
    notes.push(`history without the archive: ${hotOnly.map((r) => `exit ${r.code}: ${r.stderr.trim()}`).join('; ')}`);
  return { notes, checks };
}
