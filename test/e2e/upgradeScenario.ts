import { execFile } from 'node:child_process';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { generateSigningKey, signingKeyToPem } from '../../src/core/declaration/index.ts';
import type { SimulatedNode } from '../../src/simulation/simulatedNode.ts';
import { createPostgresEventStore, postgresSchemaVersion } from '../../src/store/postgres/index.ts';
import type { EventStore, StreamWrite } from '../../src/store/index.ts';
import type { AmqpConnection } from '../../src/transport/amqpConnection.ts';
import { defaultBroker, uniqueTag } from '../support/broker.ts';
import { declareMesh, enrollSimulatedNodes, startReportLoad } from '../support/faults/simulatedFleet.ts';
import type { Receipt } from '../support/faults/simulatedFleet.ts';
import type { BrokerLab } from '../support/broker.ts';
import { postgresTestUrl, scratchSchema } from '../support/postgres.ts';
import type { PreviousRelease } from '../support/previousRelease.ts';
import { startServe, thisBin } from '../support/serveProcess.ts';
import type { ServeProcess } from '../support/serveProcess.ts';
import { sleep, until } from '../support/until.ts';

// An upgrade as an operator runs it (docs/operations.md "Upgrades"): the previous release's
// `converge serve` (built by ../support/previousRelease.ts) and this one's on one PostgreSQL
// schema and one broker vhost, simulated nodes reporting all along and declarations POSTed to
// both. Old first, new joins, old stopped (SIGTERM): the new one takes ingest and the relay.
// Then the reverse: an old one joins the new, the new one is stopped, the old one takes over.
// Checked: every confirmed report stored once, every accepted declaration received, both APIs
// agree, `replay --verify` of each release over the other's snapshot, a warm start of each from
// the other's snapshot; then a made-up event type appended to the store, and a schema version
// above every release's, to see how each release refuses them.

const NODES = 6;
const PACE_MS = 50;
const DECLARE_EVERY_MS = 150;
const madeUp = 'NodeTeleported';

type Accepted = { digest: string; node: string; via: string };
export type UpgradeResult = { notes: string[]; checks: Record<string, boolean> };

/** Every report message id in the store, with how often it is stored. */
async function storedReportCounts(store: EventStore): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for await (const batch of store.readAll())
    for (const e of batch) {
      if (e.type !== 'ReportReceived') continue;
      const id = e.data.transport.messageId ?? `(no id)/${e.id}`;
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
  return counts;
}

const health = async (base: string): Promise<{ position: string | null }> =>
  (await (await fetch(`${base}/healthz`)).json()) as { position: string | null };
/**
 * Whether the engine at `base` has folded everything up to `head`. At least, not exactly: an engine
 * may append after the head was read (a liveness transition, its observation span), and then its
 * position never equals that head again.
 */
const folded = async (base: string, head: string): Promise<boolean> => {
  const p = (await health(base)).position;
  return p !== null && BigInt(p) >= BigInt(head);
};

/** `progress` hears each step as it starts (a slow machine's log says where the time went). */
export async function runUpgrade(
  release: PreviousRelease,
  lab: BrokerLab,
  progress: (step: string) => void = () => {},
): Promise<UpgradeResult> {
  const scratch = scratchSchema('converge_upgrade');
  const key = generateSigningKey();
  const keyPath = join(lab.dir, 'signing.pem');
  writeFileSync(keyPath, signingKeyToPem(key), { mode: 0o600 });
  const token = `upgrade-${uniqueTag()}${uniqueTag()}`;
  const auth = { authorization: `Bearer ${token}` };
  const tag = uniqueTag();
  const ids = Array.from({ length: NODES }, (_, i) => `up-${tag}-${i}`);
  const snapshotOf = (name: string): string => join(lab.dir, `${name}.snapshot.json`);
  const env = (name: string, broker = true): Record<string, string> => ({
    CONVERGE_STORE: scratch.url,
    ...(broker ? { CONVERGE_AMQP_URL: lab.engineUrl, CONVERGE_MANAGEMENT_URL: defaultBroker.managementUrl } : {}),
    CONVERGE_SIGNING_KEY: keyPath,
    CONVERGE_API_TOKENS: `${token}:read,send`,
    CONVERGE_SNAPSHOT: snapshotOf(name),
    CONVERGE_ENGINE_ID: name,
    CONVERGE_LOG_LEVEL: 'info',
    // A clean stop is checked, not its speed: the default 10 s bound can pass on a loaded machine.
    CONVERGE_STOP_TIMEOUT_MS: '60000',
  });
  const engines: ServeProcess[] = [];
  const serve = (name: string, bin: string, broker = true): ServeProcess => {
    const e = startServe(['serve', '--port', '0'], env(name, broker), bin);
    engines.push(e);
    return e;
  };
  const conns: AmqpConnection[] = [];
  const sims: SimulatedNode[] = [];
  const reader = createPostgresEventStore(scratch.url);
  const notes: string[] = [];
  const checks: Record<string, boolean> = {};
  const t0 = Date.now();
  const untilSaid: typeof until = (what, ...rest) => {
    progress(`${Date.now() - t0} ms: waiting for ${what}`);
    return until(what, ...rest);
  };
  let stopLoad = (): void => undefined;
  let declaring = false;
  try {
    await declareMesh(lab.engineUrl, ids);

    // The previous release first: it takes mesh.reports and the relay lease. Then this one.
    const old1 = serve('old1', release.bin);
    const urlOld1 = await old1.url;
    await untilSaid('the old engine to take the relay lease', () => old1.logged(/relay lease taken/), 60_000);
    const new1 = serve('new1', thisBin);
    const urlNew1 = await new1.url;

    const receipts: Receipt[] = [];
    await enrollSimulatedNodes({ enroll: (id) => lab.enroll(id), ids, key, tag: 'upgrade', receipts, sims, conns });
    const load = startReportLoad(sims, PACE_MS);
    stopLoad = load.stop;
    const confirmed = load.confirmed;
    const accepted: Accepted[] = [];
    const refused: string[] = [];
    let apis = [
      { name: 'old1', url: urlOld1 },
      { name: 'new1', url: urlNew1 },
    ];
    declaring = true;
    const declarer = (async () => {
      for (let i = 0; declaring; i++) {
        const api = apis[i % apis.length]!;
        const node = ids[i % ids.length]!;
        try {
          const res = await fetch(`${api.url}/v1/nodes/${node}/declarations`, {
            method: 'POST',
            headers: { ...auth, 'content-type': 'application/json' },
            body: JSON.stringify({ resources: [{ id: 'web', image: `web:${i}` }] }),
          });
          if (res.status === 202) accepted.push({ digest: ((await res.json()) as { digest: string }).digest, node, via: api.name });
          else refused.push(`${api.name}: ${res.status} ${await res.text()}`);
        } catch (e) {
          refused.push(`${api.name}: ${(e as Error).message}`);
        }
        await sleep(DECLARE_EVERY_MS);
      }
    })();
    const received = (digest: string): boolean => receipts.some((r) => r.digest === digest);
    const deliveredVia = (via: string, from = 0): boolean => accepted.slice(from).some((d) => d.via === via && received(d.digest));

    await untilSaid(
      'reports and declarations through both releases',
      () => confirmed().size >= 150 && deliveredVia('old1') && deliveredVia('new1'),
      60_000,
    );

    // Old stopped as an operator stops it: the new one must take ingest and the relay.
    apis = [{ name: 'new1', url: urlNew1 }];
    const stoppedAt = Date.now();
    const acceptedBeforeStop = accepted.length;
    const confirmedBeforeStop = confirmed();
    const old1Code = await old1.stop();
    checks['oldStoppedCleanly'] = old1Code === 0;
    if (old1Code !== 0) notes.push(`the old engine exited ${old1Code} on SIGTERM: ${old1.stderr().slice(-1500)}`);
    await untilSaid('the new engine to take the relay lease', () => new1.logged(/relay lease taken/, stoppedAt), 60_000);
    await untilSaid(
      'reports after the stop stored and a declaration after it delivered',
      async () => {
        const counts = await storedReportCounts(reader);
        const after = [...confirmed()].filter((m) => !confirmedBeforeStop.has(m));
        return after.length > 0 && after.every((m) => counts.has(m)) && deliveredVia('new1', acceptedBeforeStop);
      },
      { timeoutMs: 60_000, everyMs: 200 },
    );
    notes.push(
      `old first: the new engine took the relay ${new1.logged(/relay lease taken/, stoppedAt)!.at - stoppedAt} ms after the old one was told to stop`,
    );

    // The reverse: the previous release joins the new one, then the new one is stopped.
    const old2 = serve('old2', release.bin);
    const urlOld2 = await old2.url;
    apis = [
      { name: 'old2', url: urlOld2 },
      { name: 'new1', url: urlNew1 },
    ];
    const acceptedBeforeJoin = accepted.length;
    await untilSaid('declarations through the old engine that joined', () => deliveredVia('old2', acceptedBeforeJoin), 60_000);
    declaring = false;
    await declarer;
    load.finish();
    await load.done;
    checks['everyReportStoredOnce'] = await untilSaid(
      'every confirmed report stored',
      async () => {
        const counts = await storedReportCounts(reader);
        return [...confirmed()].every((m) => counts.get(m) === 1) && [...counts.values()].every((n) => n === 1);
      },
      { timeoutMs: 60_000, everyMs: 200 },
    ).then(
      () => true,
      () => false,
    );
    checks['everyDeclarationReceived'] = await untilSaid(
      'every accepted declaration received',
      () => accepted.every((d) => received(d.digest)),
      60_000,
    ).then(
      () => true,
      () => false,
    );
    await untilSaid('the nodes to report what they applied', () => sims.every((s) => s.confirmedReports().length > 0), 60_000);
    const head = String(await reader.headPosition());
    await untilSaid('both releases at the store head', async () => (await folded(urlOld2, head)) && (await folded(urlNew1, head)), 60_000);
    const view = async (base: string): Promise<string> =>
      JSON.stringify(await (await fetch(`${base}/v1/nodes?prefix=up-${tag}-`, { headers: auth })).json());
    checks['bothReleasesAnswerTheSameStates'] = (await view(urlOld2)) === (await view(urlNew1));

    const stoppedNewAt = Date.now();
    checks['newStoppedCleanly'] = (await new1.stop()) === 0;
    await untilSaid('the old engine to take the relay lease', () => old2.logged(/relay lease taken/, stoppedNewAt), 60_000);
    const lastReports = await Promise.all(sims.map((s) => s.report({ applied: ['after-the-new-stopped'] })));
    const res = await fetch(`${urlOld2}/v1/nodes/${ids[0]}/declarations`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ resources: [{ id: 'web', image: 'web:last' }] }),
    });
    const last = ((await res.json()) as { digest: string }).digest;
    await untilSaid(
      'the old engine to store the last reports and deliver the last declaration',
      async () => {
        const counts = await storedReportCounts(reader);
        return received(last) && lastReports.every((r) => counts.get(r.messageId) === 1);
      },
      60_000,
    );
    checks['oldTookOverAfterTheNew'] = true;
    await untilSaid('the nodes to report the last declaration', () => sims[0]!.confirmedReports().some((r) => r.declared === last), 60_000);
    const finalHead = String(await reader.headPosition());
    await untilSaid('the old engine at the head', () => folded(urlOld2, finalHead), 60_000);
    checks['oldStoppedCleanlyAgain'] = (await old2.stop()) === 0;
    const totalReports = [...(await storedReportCounts(reader)).values()].reduce((a, b) => a + b, 0);
    notes.push(
      `${totalReports} reports stored once each; ${accepted.length + 1} declarations accepted (${['old1', 'new1', 'old2'].map((v) => `${accepted.filter((d) => d.via === v).length} via ${v}`).join(', ')}), every one received; ${refused.length} POST(s) refused (${[...new Set(refused.map((r) => r.slice(0, 80)))].slice(0, 2).join(' / ')})`,
    );

    // Each release verifies the snapshot the other wrote against a fold of the whole store.
    const replay = async (bin: string, snapshot: string): Promise<string> => {
      try {
        const { stdout } = await promisify(execFile)(process.execPath, [
          bin,
          'replay',
          '--verify',
          '--json',
          '--store',
          scratch.url,
          '--snapshot',
          snapshot,
        ]);
        const r = JSON.parse(stdout.trim().split('\n').pop()!) as { verified: boolean; nodes: number; differences: number };
        return r.verified && r.nodes === NODES ? 'verified' : `${r.nodes} nodes, ${r.differences} difference(s)`;
      } catch (e) {
        return (e as Error).message;
      }
    };
    const newOverOld = await replay(thisBin, snapshotOf('old2'));
    const oldOverNew = await replay(release.bin, snapshotOf('new1'));
    // A release reads the snapshot formats it knows: when this one writes a newer format, the one
    // before refuses it by name, and its serve folds from zero (docs/operations.md "Upgrades").
    const [newFormat, oldFormat] = [snapshotFormatOf(snapshotOf('new1')), snapshotFormatOf(snapshotOf('old2'))];
    const oldReadsNewFormat = newFormat === oldFormat;
    checks['newReplayVerifiesTheOldSnapshot'] = newOverOld === 'verified';
    checks['oldReplayVerifiesTheNewSnapshot'] = oldReadsNewFormat
      ? oldOverNew === 'verified'
      : oldOverNew.includes(`snapshot is format ${newFormat}; this engine reads format ${oldFormat}`);
    if (!oldReadsNewFormat) notes.push(`snapshot format ${newFormat} here, ${oldFormat} in the previous release`);
    notes.push(`replay --verify: this release over the old one's snapshot ${newOverOld}; the old release over this one's ${oldOverNew}`);

    // Warm starts from the other's snapshot (store only), then a type neither release knows.
    copyFileSync(snapshotOf('old2'), snapshotOf('new2'));
    copyFileSync(snapshotOf('new1'), snapshotOf('old3'));
    const new2 = serve('new2', thisBin, false);
    const old3 = serve('old3', release.bin, false);
    const [urlNew2, urlOld3] = [await new2.url, await old3.url];
    const readyz = async (
      base: string,
    ): Promise<{ status: number; body: { code?: string; detail?: string; details?: Record<string, string> } }> => {
      const r = await fetch(`${base}/readyz`);
      return { status: r.status, body: (await r.json()) as { code?: string } };
    };
    await untilSaid(
      'both warm starts ready',
      async () => (await readyz(urlNew2)).status === 200 && (await readyz(urlOld3)).status === 200,
      60_000,
    );
    checks['newRestoredTheOldSnapshot'] = new2.logged(/restored read model from snapshot/) !== undefined;
    checks['oldRestoredTheNewSnapshot'] = oldReadsNewFormat
      ? old3.logged(/restored read model from snapshot/) !== undefined
      : old3.logged(/snapshot not used \(format\)/) !== undefined;

    const write = {
      stream: `node-${ids[1]}`,
      expected: 'any',
      events: [{ id: crypto.randomUUID(), type: madeUp, data: { node: ids[1] } }],
    };
    const at = (await reader.append([write as unknown as StreamWrite])).position!;
    const refusedNew = await untilSaid(
      'this release to refuse the made-up event',
      async () => {
        const r = await readyz(urlNew2);
        return r.status === 503 && r.body.code === 'CONVERGE_ERR_PROJECTION_FAILED' ? r.body : null;
      },
      60_000,
    );
    checks['newRefusesTheUnknownType'] =
      refusedNew.details?.['position'] === String(at) &&
      refusedNew.details['type'] === madeUp &&
      (await health(urlNew2)).position === String(at - 1n);
    const oldSaw = await untilSaid(
      'the old release to meet the made-up event',
      () => old3.logged(new RegExp(madeUp)) ?? old3.lines().find((l) => l.raw.includes(madeUp)),
      60_000,
    );
    const oldAt = (await health(urlOld3)).position;
    const oldReady = await readyz(urlOld3);
    checks['oldDoesNotFoldPastTheUnknownType'] = oldAt !== null && BigInt(oldAt) < at;
    notes.push(
      `a made-up ${madeUp} at position ${at}: this release /readyz 503 ${refusedNew.code ?? ''}: ${refusedNew.detail ?? ''}; the old release logged "${oldSaw.msg}", stays at position ${oldAt}, /readyz ${oldReady.status}${oldReady.body.code === undefined ? '' : ` ${oldReady.body.code}`}`,
    );
    await new2.stop();
    await old3.stop();

    // A store schema newer than every release's: the old release must refuse it at start.
    const client = new pg.Client({ connectionString: postgresTestUrl });
    await client.connect();
    try {
      await client.query(`UPDATE ${scratch.schema}.meta SET value = $1 WHERE key = 'schema_version'`, [String(postgresSchemaVersion + 1)]);
    } finally {
      await client.end();
    }
    // Each release started on it: it must exit (status 1) rather than serve; one that listens is asked for /readyz.
    const refusal = async (name: string, bin: string, broker: boolean): Promise<{ exited: boolean; said: string }> => {
      const e = serve(name, bin, broker);
      let listening = false;
      e.url.then(() => (listening = true)).catch(() => undefined);
      await untilSaid(`${name} to exit or listen`, () => e.child.exitCode !== null || listening, 60_000);
      const said =
        e
          .stderr()
          .split('\n')
          .find((l) => /newer Converge/.test(l)) ?? e.stderr().slice(-300);
      if (e.child.exitCode !== null) return { exited: e.child.exitCode !== 0, said: `exited ${e.child.exitCode}: ${said.slice(0, 200)}` };
      const r = await fetch(`${await e.url}/readyz`);
      const body = await r.text();
      await e.kill();
      return { exited: false, said: `listening, /readyz ${r.status} ${body.slice(0, 200)}` };
    };
    const oldWithBroker = await refusal('old4', release.bin, true);
    const oldApiOnly = await refusal('old5', release.bin, false);
    const newApiOnly = await refusal('new3', thisBin, false);
    checks['oldRefusesANewerSchema'] = oldWithBroker.exited && /newer Converge/.test(oldWithBroker.said);
    checks['newServeExitsOnANewerSchema'] = newApiOnly.exited && /newer Converge/.test(newApiOnly.said);
    notes.push(
      `a store at schema v${postgresSchemaVersion + 1}: the old release's serve with a broker ${oldWithBroker.said}; without one ${oldApiOnly.said}; this release's without one ${newApiOnly.said}`,
    );
    return { notes, checks };
  } finally {
    stopLoad();
    declaring = false;
    for (const s of sims) await s.stop().catch(() => undefined);
    for (const c of conns) await c.close().catch(() => undefined);
    for (const e of engines) await e.kill();
    await reader.close().catch(() => undefined);
    await scratch.drop().catch(() => undefined);
  }
}

/** The format number in a snapshot file's header line. */
export function snapshotFormatOf(path: string): number {
  const bytes = readFileSync(path);
  return (JSON.parse(bytes.subarray(0, bytes.indexOf(0x0a)).toString('utf8')) as { format: number }).format;
}
