import { createPublicKey } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { eventTime, parseAt, readAt } from '../../../projections/index.ts';
import { checkEvidenceProofs } from '../../core/audit/evidenceCheck.ts';
import type { EvidenceFinding, KeyUsed } from '../../core/audit/evidenceCheck.ts';
import type { EvidenceAnswer, EvidenceBundle } from '../../core/audit/evidenceFormat.ts';
import { keyIdOf, verifyDeclaration } from '../../core/declaration/index.ts';
import type { Recorded } from '../../core/events/index.ts';
import { EvidenceDecodeError, decodeEvidence, evidenceAnswer, evidenceStreams } from './answer.ts';
import type { DecodedEvidence } from './answer.ts';

// `converge audit check` (docs/audit.md#evidence-bundles-how-an-auditor-checks-one-with-nothing-but-converge):
// an evidence bundle checked offline, with nothing but its bytes and the keys the auditor holds.
// The proofs first (src/core/audit/evidenceCheck.ts), then the proven bytes decoded, the
// declarations' signatures checked, and the fold's answer computed again and compared. Pure.

export type EvidenceCheckOptions = Readonly<{
  auditKey: KeyObject | null;
  /** The declaration public key the auditor holds; without it the bundle's own, if it carries one. */
  declarationKey: KeyObject | null;
  /** Accept a bundle proven against an unsigned head (it then proves only what the store said at export). */
  allowUnsigned: boolean;
}>;

export type EvidenceCheckResult = Readonly<{
  verified: boolean;
  signed: boolean;
  keyUsed: KeyUsed | null;
  finding: EvidenceFinding | null;
  events: Readonly<{ node: number; observation: number; inWindow: number | null }>;
  /** `source`: the key given, or the bundle's own (which, like its audit key, proves nothing alone). */
  declarations: Readonly<{ keyId: string | null; source: 'given' | 'bundle' | null; checked: number; otherKeys: number }>;
  /** The answer computed again from the events, once they decoded. */
  answer: EvidenceAnswer | null;
}>;

type DeclarationCheck = Readonly<{ keyId: string | null; checked: number; otherKeys: number; finding: EvidenceFinding | null }>;

/** Every DeclarationSent the key named signed: its signature over the exact declaration bytes carried. */
function checkDeclarations(events: readonly Recorded[], key: KeyObject | null): DeclarationCheck {
  const sends = events.filter((e) => e.type === 'DeclarationSent');
  if (key === null) return { keyId: null, checked: 0, otherKeys: sends.length, finding: null };
  const keyId = keyIdOf(key);
  let checked = 0;
  for (const e of sends) {
    if (e.data.keyId !== keyId) continue;
    const ok = verifyDeclaration(Buffer.from(e.data.declaration, 'base64'), Buffer.from(e.data.signature, 'base64'), {
      publicKey: key,
      keyId,
    });
    if (!ok) {
      const f = {
        kind: 'declaration' as const,
        position: e.position.toString(),
        message: `the declaration sent at ${e.position} does not verify with key ${keyId}`,
      };
      return { keyId, checked, otherKeys: 0, finding: f };
    }
    checked++;
  }
  return { keyId, checked, otherKeys: sends.length - checked, finding: null };
}

function declarationKeyOf(b: EvidenceBundle, given: KeyObject | null): KeyObject | null {
  if (given !== null || b.keys.declaration === null) return given;
  try {
    return createPublicKey(b.keys.declaration.pem);
  } catch {
    return null;
  }
}

/** The first field where the stated answer and the computed one differ, or null. */
function answerDifference(stated: EvidenceAnswer, computed: EvidenceAnswer): string | null {
  for (const k of Object.keys(computed) as (keyof EvidenceAnswer)[]) {
    const a = JSON.stringify(stated[k]);
    const c = JSON.stringify(computed[k]);
    if (a !== c) return `${k}: the bundle states ${a}, its events give ${c}`;
  }
  return null;
}

/** The node's events at or after the window's start (`from`), or null when no window was asked for. */
const inWindow = (events: readonly Recorded[], from: string | null): number | null => {
  const start = from === null ? null : parseAt(from);
  if (start === null) return null;
  return events.filter((e) => (start.kind === 'position' ? e.position >= start.position : Date.parse(eventTime(e)) >= start.time)).length;
};

export function checkEvidence(b: EvidenceBundle, o: EvidenceCheckOptions): EvidenceCheckResult {
  const proofs = checkEvidenceProofs(b, { auditKey: o.auditKey, streams: evidenceStreams(b.node) });
  const counted = { node: 0, observation: 0, inWindow: null };
  const result = (
    finding: EvidenceFinding | null,
    decoded: DecodedEvidence | null = null,
    declarations: DeclarationCheck | null = null,
    answer: EvidenceAnswer | null = null,
  ): EvidenceCheckResult => ({
    verified: finding === null,
    signed: b.signed,
    keyUsed: proofs.keyUsed,
    finding,
    events:
      decoded === null
        ? counted
        : { node: decoded.node.length, observation: decoded.observation.length, inWindow: inWindow(decoded.node, b.from) },
    declarations: {
      keyId: declarations?.keyId ?? null,
      source: declarations === null || declarations.keyId === null ? null : o.declarationKey !== null ? 'given' : 'bundle',
      checked: declarations?.checked ?? 0,
      otherKeys: declarations?.otherKeys ?? 0,
    },
    answer,
  });
  if (proofs.finding !== null) return result(proofs.finding);
  let decoded: DecodedEvidence;
  try {
    decoded = decodeEvidence(b.node, b.events);
  } catch (err) {
    if (!(err instanceof EvidenceDecodeError)) throw err;
    return result({ kind: 'decode', position: err.position, message: err.message });
  }
  const declarations = checkDeclarations(decoded.node, declarationKeyOf(b, o.declarationKey));
  if (declarations.finding !== null) return result(declarations.finding, decoded, declarations);
  const at = readAt(b.at);
  if ('problem' in at)
    return result(
      {
        kind: 'moment',
        position: null,
        message: `the bundle's moment ${JSON.stringify(b.at)} ${at.problem}: the answer was not recomputed (an earlier release took a time without its zone, in the exporter's own)`,
      },
      decoded,
      declarations,
    );
  const answer = evidenceAnswer(b.node, decoded, at, b.graceMs);
  const diff = answerDifference(b.answer, answer);
  if (diff !== null)
    return result(
      { kind: 'answer', position: answer.position, message: `the answer differs from the fold's: ${diff}` },
      decoded,
      declarations,
      answer,
    );
  if (!b.signed && !o.allowUnsigned)
    return result(
      {
        kind: 'unsigned',
        position: null,
        message: 'the proofs are against a head nobody signed: they show only what the store said at export (accept it with --unsigned)',
      },
      decoded,
      declarations,
      answer,
    );
  return result(null, decoded, declarations, answer);
}
