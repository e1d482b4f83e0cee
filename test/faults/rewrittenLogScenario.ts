import { generateKeyPairSync } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { signCheckpoint } from '../../src/core/audit/checkpoint.ts';
import { parseWitnessJson, witnessFileName, witnessJson } from '../../src/core/audit/checkpointCheck.ts';
import { auditStream, makeAuditCheckpointed } from '../../src/core/events/index.ts';
import type { Recorded } from '../../src/core/events/index.ts';
import { createAuditCheckpoints } from '../../src/engine/auditCheckpoints.ts';
import { createFolderWitness } from '../../src/engine/auditWitness.ts';
import type { EventStore, NewEvent } from '../../src/store/port.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { writeHistory } from '../support/auditHistory.ts';
import { cliIn } from '../support/cliInProcess.ts';
import { logger } from '../support/logger.ts';
import { auditScenarioResult } from './scenarios.ts';
import type { Scenario, ScenarioResult } from './scenarios.ts';

// The insider who rewrites the whole log consistently (docs/audit.md#checkpoints-and-witnesses):
// every row, leaf hash and head recomputed (the rewritten events appended through a store's own
// appends), and the log's checkpoints signed again, with another key or the audit key itself.
// `converge audit verify` finds nothing in such a log alone; against the witness folder the engine
// wrote it must name the first witnessed checkpoint the rewrite touched. Shared by
// rewrittenLog.test.ts and report.ts (RELIABILITY.md).

const rounds = 4;
const nodes = 8;

export type RewriteCase = Readonly<{
  name: string;
  /** The events of the rewritten log, from the pristine one's. */
  rewrite: (events: readonly Recorded[]) => Recorded[];
  /** Who signs the rewritten log's checkpoint: the audit key (stolen), another, or none. */
  signer: 'audit' | 'other' | 'none';
  /** A checkpoint appended through the store with a forged signature, found with the audit key. */
  forge?: boolean;
  /** The attacker also holds the witness folder and rewrites it: the documented limit. */
  rewritesWitness?: boolean;
}>;

/** One report a third of the way in names another digest; the old checkpoints, which no longer hold, are left out. */
const changeDigest = (events: readonly Recorded[]): Recorded[] => {
  const i = events.findIndex((e, k) => e.type === 'ReportReceived' && k > events.length / 3);
  return events
    .map((e, k) => (k === i ? ({ ...e, data: { ...e.data, declared: 'f'.repeat(64) } } as Recorded) : e))
    .filter((e) => e.stream !== auditStream);
};

export const rewriteCases: readonly RewriteCase[] = [
  { name: "a report's digest changed, the log rewritten and signed with another key", rewrite: changeDigest, signer: 'other' },
  { name: "a report's digest changed, the log rewritten and signed with the stolen audit key", rewrite: changeDigest, signer: 'audit' },
  {
    name: 'the tail cut after the second checkpoint, signed with the stolen audit key',
    rewrite: (events) => events.slice(0, events.findIndex((e) => e.stream === auditStream && e.revision === 1n) + 1),
    signer: 'audit',
  },
  {
    name: 'the checkpoint events removed from the log',
    rewrite: (events) => events.filter((e) => e.stream !== auditStream),
    signer: 'none',
  },
  {
    name: 'a checkpoint with a forged signature appended through the store',
    rewrite: (events) => [...events],
    signer: 'none',
    forge: true,
  },
  {
    name: 'store, audit key and witness folder all rewritten (the documented limit)',
    rewrite: changeDigest,
    signer: 'audit',
    rewritesWitness: true,
  },
];

/** Append `events` to `store` as they were, one call per run of one stream: a valid tree over other content. */
async function appendAll(store: EventStore, events: readonly Recorded[]): Promise<void> {
  for (const e of events) {
    const event = { id: e.id, type: e.type, data: e.data } as NewEvent;
    await store.append([{ stream: e.stream, expected: 'any', events: [event] }]);
  }
}

async function readEvents(store: EventStore): Promise<Recorded[]> {
  const out: Recorded[] = [];
  for await (const batch of store.readAll()) out.push(...batch);
  return out;
}

/** The parts of `audit verify --json` the cases read. */
export type VerifyJson = Readonly<{
  checkpoints: Readonly<{ finding: Readonly<{ kind: string }> | null }>;
  witness?: Readonly<{ finding: Readonly<{ size: number }> | null }>;
}>;

export type RewriteLab = Readonly<{
  dir: string;
  witnessSizes: readonly number[];
  /** Rewrite a copy as the case says, run `converge audit verify` on it with the audit key and the witness. */
  verify: (c: RewriteCase) => Promise<Readonly<{ code: number; out: VerifyJson; expectSize: number | null }>>;
  remove: () => void;
}>;

export async function createRewriteLab(): Promise<RewriteLab> {
  const dir = mkdtempSync(join(tmpdir(), 'converge-rewrite-'));
  const audit = generateKeyPairSync('ed25519');
  const other = generateKeyPairSync('ed25519');
  writeFileSync(join(dir, 'audit.pub'), audit.publicKey.export({ format: 'pem', type: 'spki' }));
  const witness = join(dir, 'witness');
  const pristine = createSqliteEventStore(join(dir, 'pristine.db'));
  const cp = createAuditCheckpoints({
    store: pristine,
    key: audit.privateKey,
    logger,
    everyEvents: 1,
    everyMs: 3_600_000,
    pollMs: 3_600_000,
    witnesses: [createFolderWitness(witness, logger)],
  });
  await cp.start();
  for (let r = 0; r < rounds; r++) {
    await writeHistory(pristine, nodes, r);
    await cp.checkpoint();
  }
  await cp.stop();
  const events = await readEvents(pristine);
  const leaves = (await pristine.readStored({ limit: 1_000_000 })).map((s) => Buffer.from(s.leafHash!).toString('hex'));
  await pristine.close();
  const witnessSizes = readdirSync(witness)
    .map((f) => (parseWitnessJson(readFileSync(join(witness, f), 'utf8')) as { checkpoint: { size: number } }).checkpoint.size)
    .sort((a, b) => a - b);
  let copies = 0;

  async function verify(c: RewriteCase) {
    const n = ++copies;
    const path = join(dir, `rewritten${n}.db`);
    const store = createSqliteEventStore(path);
    await appendAll(store, c.rewrite(events));
    const key: KeyObject | null = c.signer === 'audit' ? audit.privateKey : c.signer === 'other' ? other.privateKey : null;
    const head = await store.auditHead();
    const signed = key === null ? null : signCheckpoint({ size: Number(head.size), root: head.root, at: new Date().toISOString() }, key);
    if (signed !== null) await store.append([{ stream: auditStream, expected: 'any', events: [makeAuditCheckpointed(signed)] }]);
    if (c.forge === true) {
      const real = signCheckpoint({ size: Number(head.size), root: head.root, at: new Date().toISOString() }, audit.privateKey);
      const fake = { ...real, signature: Buffer.alloc(64, 3).toString('base64') };
      await store.append([{ stream: auditStream, expected: 'any', events: [makeAuditCheckpointed(fake)] }]);
    }
    const rewrittenLeaves = (await store.readStored({ limit: 1_000_000 })).map((s) => Buffer.from(s.leafHash!).toString('hex'));
    await store.close();
    let witnessDir = witness;
    if (c.rewritesWitness === true && signed !== null) {
      witnessDir = join(dir, `witness${n}`);
      cpSync(witness, witnessDir, { recursive: true });
      for (const f of readdirSync(witnessDir)) rmSync(join(witnessDir, f));
      writeFileSync(join(witnessDir, witnessFileName(signed)), witnessJson(signed));
    }
    // The first leaf the rewrite changed, and so the first witnessed size that covers it.
    let first = leaves.findIndex((l, i) => rewrittenLeaves[i] !== l);
    if (first < 0 && rewrittenLeaves.length > leaves.length) first = leaves.length;
    const expectSize = first < 0 ? null : (witnessSizes.find((s) => s > first) ?? null);
    const r = await cliIn(dir, [
      'audit',
      'verify',
      '--store',
      `sqlite:${path}`,
      '--audit-pub',
      'audit.pub',
      '--witness',
      witnessDir,
      '--json',
    ]);
    rmSync(path, { force: true });
    return { code: r.code, out: JSON.parse(r.stdout) as VerifyJson, expectSize };
  }
  return { dir, witnessSizes, verify, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** What verify must answer for each case: [exit code, the finding's kind]. */
export const expected = (c: RewriteCase): [number, string | null] =>
  c.rewritesWitness === true ? [0, null] : c.forge === true ? [1, 'signature'] : c.signer === 'other' ? [1, 'key'] : [3, null];

export const rewrittenLog: Scenario = {
  name: 'rewritten log and witness',
  faults:
    'the whole SQLite log rewritten consistently (rows, leaf hashes and head recomputed) and signed again: a changed report with another key and with the stolen audit key, the tail cut, the checkpoint events removed, a forged checkpoint signature; and the documented limit, store + audit key + witness folder rewritten',
  async run(): Promise<ScenarioResult> {
    const lab = await createRewriteLab();
    const checks: Record<string, boolean> = {};
    let tried = 0;
    let missed = 0;
    try {
      for (const c of rewriteCases) {
        const r = await lab.verify(c);
        const [code, kind] = expected(c);
        const witnessSize = r.out.witness?.finding?.size ?? null;
        const found = r.code === code && (kind === null || r.out.checkpoints.finding?.kind === kind);
        // Wherever a witness finding is due, it names the first witnessed size the rewrite touched.
        const sized = c.rewritesWitness === true || c.forge === true || witnessSize === r.expectSize;
        if (c.rewritesWitness === true) {
          checks[`${c.name}: not detected, as documented`] = r.code === 0;
          continue;
        }
        tried++;
        if (!(found && sized)) missed++;
        checks[`${c.name} → exit ${r.code}${witnessSize === null ? '' : `, witness size ${witnessSize}`}`] = found && sized;
      }
      const events = rounds * nodes * 3 + lab.witnessSizes.length;
      return auditScenarioResult(this, {
        events,
        tried,
        missed,
        notes: [
          `${events} events and ${lab.witnessSizes.length} checkpoints (sizes ${lab.witnessSizes.join(', ')}) written by the engine's checkpointer with a witness folder`,
          'each rewrite on a fresh store, checked by converge audit verify --audit-pub --witness',
          'hostile tried = rewrites, hostile appended = rewrites not found with the expected exit and witnessed size',
          'no recovery: a rewritten log is reported, not repaired',
        ],
        checks,
      });
    } finally {
      lab.remove();
    }
  },
};
