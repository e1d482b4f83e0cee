import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseEvidence } from '../../core/audit/evidenceFormat.ts';
import type { EvidenceBundle } from '../../core/audit/evidenceFormat.ts';
import { ConvergeError } from '../../core/errors.ts';
import { checkEvidence } from '../../readModel/evidence/check.ts';
import type { EvidenceCheckResult } from '../../readModel/evidence/check.ts';
import type { Context } from '../command.ts';
import type { CliIo } from '../io.ts';
import { printJson, short } from '../output.ts';
import { readAuditPub, readSigningPub } from './auditSources.ts';

// `converge audit check <bundle>` (docs/audit.md#evidence-bundles-how-an-auditor-checks-one-with-nothing-but-converge):
// the bundle checked offline, with no store, broker or network. Exit 0 verified; 1 forged or
// failed, with the position and kind; 2 a usage mistake, a file that is not a bundle, or no key
// to check its signatures with (nothing is claimed either way).

const exitVerified = 0;
const exitForged = 1;
const exitCannotCheck = 2;

const ownKeyNote = "a bundle's own key proves nothing alone: check it with the audit key you hold (--audit-pub)";

/** What a finding makes of the bundle: no key is no claim, an unsigned head is not a forgery. */
const headline = (kind: string): string =>
  kind === 'nokey' || kind === 'moment' ? 'NOT CHECKED' : kind === 'unsigned' ? 'NOT ACCEPTED' : 'FORGED';

function keyLine(r: EvidenceCheckResult, given: boolean): string {
  if (r.finding?.kind === 'nokey') return 'key: none (neither given nor in the bundle)';
  if (r.finding?.kind === 'key' && r.keyUsed === null)
    return given
      ? "key: the audit key given (--audit-pub) is not the bundle's: nothing was verified with it"
      : "key: the bundle's own audit key is not usable (above)";
  // A finding before any signature was checked (the tree, a proof): no key was used, whatever the bundle holds.
  if (r.keyUsed === null && r.finding !== null) return 'key: none used (the check stopped before any signature: above)';
  if (r.keyUsed === null) return 'key: none used (no signed checkpoint in the bundle)';
  return r.keyUsed.source === 'given'
    ? `key: the audit key given (--audit-pub), id ${r.keyUsed.keyId}`
    : `key: the bundle's own audit key, id ${r.keyUsed.keyId}; ${ownKeyNote}`;
}

function printText(io: CliIo, b: EvidenceBundle, r: EvidenceCheckResult, given: boolean): void {
  const f = r.finding;
  if (f !== null) io.stdout(`${headline(f.kind)}${f.position === null ? '' : ` at position ${f.position}`} (${f.kind}): ${f.message}\n`);
  else {
    const cp = b.checkpoint;
    io.stdout(
      `verified: ${b.node} as of ${b.at}: ${r.events.node} events of the node and ${r.events.observation} of the observation spans, each leaf recomputed from its bytes and proven in the tree of ${b.tree.size}\n`,
    );
    io.stdout(
      cp === null
        ? `UNSIGNED: that tree is the store's head at export, which nobody signed: it shows only what the store said then\n`
        : `the tree is the checkpoint signed at ${cp.checkpoint.at} (position ${cp.position}), signature valid\n`,
    );
    if (b.latest !== null)
      io.stdout(`consistency: the log only grew from there to the latest checkpoint, size ${b.latest.checkpoint.size}\n`);
  }
  io.stdout(`${keyLine(r, given)}\n`);
  const d = r.declarations;
  io.stdout(
    d.keyId === null
      ? `declarations: signatures not checked (no declaration key: --signing-pub)\n`
      : `declarations: ${d.checked} signatures valid with ${d.source === 'given' ? 'the declaration key given' : "the bundle's own declaration key"}, id ${d.keyId}${d.otherKeys > 0 ? `, ${d.otherKeys} by other keys not checked` : ''}\n`,
  );
  if (r.events.inWindow !== null) io.stdout(`window: ${r.events.inWindow} of the node's events from ${b.from} to ${b.at}\n`);
  const a = r.answer;
  if (a !== null)
    io.stdout(
      `answer (the fold again): ${a.status}${a.caughtUp ? ', caught up' : ', not caught up'}; sent ${short(a.sentDigest)}${a.sentSerial === null ? '' : ` (serial ${a.sentSerial})`}, reported ${short(a.reportedDigest)}; ${a.liveness.state}${a.liveness.lastSeenAt === null ? '' : ` (last seen ${a.liveness.lastSeenAt})`}; ${a.folded} events folded to position ${a.position}\n`,
    );
}

export async function runCheck({ io, values, positionals, json }: Context): Promise<number> {
  if (positionals[1] === undefined)
    throw new ConvergeError('CONVERGE_ERR_USAGE', 'audit check needs a bundle file (converge audit check <bundle>)');
  const path = resolve(io.cwd, positionals[1]);
  const auditKey = typeof values['audit-pub'] === 'string' ? readAuditPub(resolve(io.cwd, values['audit-pub'])) : null;
  const declarationKey = typeof values['signing-pub'] === 'string' ? readSigningPub(resolve(io.cwd, values['signing-pub'])) : null;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    io.stderr(
      `converge: audit check cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}; nothing was checked\n`,
    );
    return exitCannotCheck;
  }
  const bundle = parseEvidence(text);
  if (typeof bundle === 'string') {
    io.stderr(`converge: ${path} is not an evidence bundle: ${bundle}; nothing was checked\n`);
    return exitCannotCheck;
  }
  const r = checkEvidence(bundle, { auditKey, declarationKey, allowUnsigned: values.unsigned === true });
  if (json)
    printJson(io, {
      verified: r.verified,
      bundle: path,
      node: bundle.node,
      at: bundle.at,
      from: bundle.from,
      signed: r.signed,
      key: r.keyUsed === null ? null : { ...r.keyUsed, ...(r.keyUsed.source === 'bundle' ? { note: ownKeyNote } : {}) },
      finding: r.finding,
      tree: bundle.tree,
      latest: bundle.latest === null ? null : { size: bundle.latest.checkpoint.size, position: bundle.latest.position },
      events: r.events,
      declarations: r.declarations,
      answer: r.answer,
    });
  else printText(io, bundle, r, auditKey !== null);
  if (r.finding === null) return exitVerified;
  return r.finding.kind === 'nokey' || r.finding.kind === 'moment' ? exitCannotCheck : exitForged;
}
