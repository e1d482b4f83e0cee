import { generateKeyPairSync } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { signCheckpoint } from '../../src/core/audit/checkpoint.ts';
import type { EvidenceKind } from '../../src/core/audit/evidenceCheck.ts';
import type { EvidenceBundle } from '../../src/core/audit/evidenceFormat.ts';
import { checkEvidence } from '../../src/readModel/evidence/check.ts';
import type { EventStore } from '../../src/store/port.ts';
import { nodes, rounds, writeSignedStore } from '../support/auditHistory.ts';
import { evidenceBundle } from '../support/evidence.ts';
import { auditScenarioResult } from './scenarios.ts';
import type { Scenario, ScenarioResult } from './scenarios.ts';

// An evidence bundle forged after it left the store (docs/audit.md#evidence-bundles-how-an-auditor-checks-one-with-nothing-but-converge):
// one event's data changed, one event left out, a proof taken from another log, the checkpoint
// signed by another key. Each must be found offline, by kind and at the position it touched. The
// bundles come from SQLite stores written through the store's appends, with checkpoints signed
// by the engine's checkpointer after each round. Shared by forgedEvidence.test.ts and report.ts (RELIABILITY.md).

export { nodes, rounds };
export const node = 'web-003';
/** Rounds 0 and 1 (writeHistory stamps round r at minute r): covered by the second checkpoint, not the first. */
export const at = '2026-01-01T00:01:00.000Z';

export type EvidenceLab = Readonly<{
  dir: string;
  audit: Readonly<{ publicKey: KeyObject; privateKey: KeyObject }>;
  other: Readonly<{ publicKey: KeyObject; privateKey: KeyObject }>;
  /** The honest bundle from store A, and one for the same node and moment from store B (another log). */
  bundle: EvidenceBundle;
  fromOtherLog: EvidenceBundle;
  storePath: string;
  remove: () => void;
}>;

export const exportBundle = (store: EventStore, auditKey: KeyObject | null, moment = at, unsigned = false): Promise<EvidenceBundle> =>
  evidenceBundle(store, node, moment, { auditKey, unsigned, now: Date.UTC(2026, 0, 2) });

export async function createEvidenceLab(): Promise<EvidenceLab> {
  const dir = mkdtempSync(join(tmpdir(), 'converge-evidence-'));
  const audit = generateKeyPairSync('ed25519');
  const other = generateKeyPairSync('ed25519');
  writeFileSync(join(dir, 'audit.pub'), audit.publicKey.export({ format: 'pem', type: 'spki' }));
  writeFileSync(join(dir, 'other.pub'), other.publicKey.export({ format: 'pem', type: 'spki' }));
  const storePath = join(dir, 'a.db');
  const a = await writeSignedStore(storePath, audit.privateKey);
  const bundle = await exportBundle(a, audit.publicKey);
  await a.close();
  // Another log: the same node, rounds and moment, but every declaration signed by a key of its own
  // (writeHistory makes one per round), so its leaves, and every proof in it, differ; the same audit key.
  const b = await writeSignedStore(join(dir, 'b.db'), audit.privateKey);
  const fromOtherLog = await exportBundle(b, audit.publicKey);
  await b.close();
  return { dir, audit, other, bundle, fromOtherLog, storePath, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

const clone = (b: EvidenceBundle): EvidenceBundle => structuredClone(b);
const nodeEvents = (b: EvidenceBundle) => b.events.filter((e) => e.stream === `node-${node}`);

export type ForgeryCase = Readonly<{
  name: string;
  forge: (lab: EvidenceLab) => EvidenceBundle;
  /** The kind the check must answer, and the position (null: none, the bundle as a whole). */
  expect: (lab: EvidenceLab) => [EvidenceKind, string | null];
}>;

/** The report of round 1: the node's fifth event. */
const target = (b: EvidenceBundle) => nodeEvents(b)[4]!;

export const forgeryCases: readonly ForgeryCase[] = [
  {
    name: "one event's data changed (a report's declared digest), the answer left as stated",
    forge: (lab) => {
      const b = clone(lab.bundle);
      const e = target(b);
      const data = JSON.parse(Buffer.from(e.data, 'base64').toString('utf8')) as Record<string, unknown>;
      e.data = Buffer.from(JSON.stringify({ ...data, declared: 'f'.repeat(64) }), 'utf8').toString('base64');
      return b;
    },
    expect: (lab) => ['inclusion', target(lab.bundle).position],
  },
  {
    name: 'one event removed (the round-0 report)',
    forge: (lab) => {
      const b = clone(lab.bundle);
      const gone = nodeEvents(b)[1]!;
      b.events = b.events.filter((e) => e !== gone);
      return b;
    },
    expect: (lab) => ['missing', nodeEvents(lab.bundle)[2]!.position],
  },
  {
    name: "one event's proof taken from another log (another store's bundle)",
    forge: (lab) => {
      const b = clone(lab.bundle);
      const i = b.events.indexOf(target(b));
      b.events[i]!.proof = [...lab.fromOtherLog.events[i]!.proof];
      return b;
    },
    expect: (lab) => ['inclusion', target(lab.bundle).position],
  },
  {
    name: "the checkpoint signed by another key, the bundle's key replaced by it (checked with the audit key)",
    forge: (lab) => {
      const b = clone(lab.bundle);
      const c = b.checkpoint!;
      const signed = signCheckpoint({ size: c.checkpoint.size, root: c.checkpoint.root, at: c.checkpoint.at }, lab.other.privateKey);
      b.checkpoint = { position: c.position, checkpoint: { ...signed.checkpoint }, signature: signed.signature };
      b.keys.audit = { keyId: signed.checkpoint.keyId, pem: lab.other.publicKey.export({ format: 'pem', type: 'spki' }).toString() };
      return b;
    },
    expect: () => ['key', null],
  },
  {
    name: "the checkpoint's signature made by another key, its key id left as the audit key's",
    forge: (lab) => {
      const b = clone(lab.bundle);
      const c = b.checkpoint!;
      const signed = signCheckpoint({ size: c.checkpoint.size, root: c.checkpoint.root, at: c.checkpoint.at }, lab.other.privateKey);
      c.signature = signed.signature;
      return b;
    },
    expect: (lab) => ['signature', lab.bundle.checkpoint!.position],
  },
  {
    name: 'the stated answer changed (status converged to refused)',
    forge: (lab) => {
      const b = clone(lab.bundle);
      b.answer = { ...b.answer, status: b.answer.status === 'refused' ? 'converged' : 'refused' };
      return b;
    },
    expect: (lab) => ['answer', lab.bundle.answer.position],
  },
];

export type Checked = Readonly<{ kind: EvidenceKind | null; position: string | null; message: string }>;

/** A bundle checked as `converge audit check --audit-pub audit.pub` does, after a trip through JSON. */
export function checkWithAuditKey(lab: EvidenceLab, b: EvidenceBundle): Checked {
  const r = checkEvidence(JSON.parse(JSON.stringify(b)) as EvidenceBundle, {
    auditKey: lab.audit.publicKey,
    declarationKey: null,
    allowUnsigned: false,
  });
  return { kind: r.finding?.kind ?? null, position: r.finding?.position ?? null, message: r.finding?.message ?? '' };
}

export const forgedEvidence: Scenario = {
  name: 'forged evidence',
  faults:
    "an evidence bundle changed after export: one event's data, one event removed, one proof from another store's log, the checkpoint signed by another key (with the bundle's key replaced, and with the key id kept), the stated answer",
  async run(): Promise<ScenarioResult> {
    const lab = await createEvidenceLab();
    const checks: Record<string, boolean> = {};
    let missed = 0;
    try {
      const honest = checkWithAuditKey(lab, lab.bundle);
      checks['the honest bundle verifies offline with the audit key'] = honest.kind === null;
      for (const c of forgeryCases) {
        const found = checkWithAuditKey(lab, c.forge(lab));
        const [kind, position] = c.expect(lab);
        const ok = found.kind === kind && found.position === position;
        if (!ok) missed++;
        checks[`${c.name} → ${kind}${position === null ? '' : ` at ${position}`}`] = ok;
      }
      const events = lab.bundle.events.length;
      return auditScenarioResult(this, {
        events,
        tried: forgeryCases.length,
        missed,
        notes: [
          `a bundle of ${events} events (the node's up to ${at} and the observation spans) from a SQLite store with ${rounds} signed checkpoints, proven against checkpoint size ${lab.bundle.tree.size} with a consistency proof to size ${lab.bundle.latest?.checkpoint.size ?? '—'}`,
          'each forgery checked offline (converge audit check --audit-pub)',
          'hostile tried = forgeries, hostile appended = forgeries not found at their position and kind',
        ],
        checks,
      });
    } finally {
      lab.remove();
    }
  },
};
