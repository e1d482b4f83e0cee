import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { ConvergeError } from '../../core/errors.ts';
import { observationStream } from '../../core/events/index.ts';
import { buildEvidence, newestCheckpoint } from '../../readModel/evidence/build.ts';
import type { Context } from '../command.ts';
import { nodeArgument, withStore } from '../command.ts';
import { asOfText, momentFlag, orderedWindow } from '../moment.ts';
import { printJson, short } from '../output.ts';
import { readAuditPub, readSigningPub } from './auditSources.ts';

// `converge audit export <node>` (docs/audit.md#evidence-bundles-how-an-auditor-checks-one-with-nothing-but-converge):
// one JSON file holding what an auditor needs to check the node's answer as of a moment offline.

const usage = 'converge audit export <node> (--at <time|position> | --from <t> --to <t>) --out <file>';

/** --at alone, or the window --from … --to (the answer is the one as of --to). */
function window(values: Context['values']): { atText: string; from: string | null } {
  const at = values.at;
  const from = values.from;
  const to = values.to;
  if (typeof at === 'string' && from === undefined && to === undefined) return { atText: at, from: null };
  if (at === undefined && typeof from === 'string' && typeof to === 'string') {
    orderedWindow({ text: from, at: momentFlag('from', from) }, { text: to, at: momentFlag('to', to) });
    return { atText: to, from };
  }
  throw new ConvergeError('CONVERGE_ERR_USAGE', `audit export needs --at, or --from and --to (${usage})`);
}

export async function runExport({ io, values, positionals, config, json }: Context): Promise<number> {
  if (positionals[1] === undefined) throw new ConvergeError('CONVERGE_ERR_USAGE', `audit export needs a node (${usage})`);
  const node = nodeArgument(positionals[1]);
  const { atText, from } = window(values);
  // `--at checkpoint`: the newest moment the log can prove; made a position once the store is open.
  const at =
    atText === newestCheckpoint && from === null
      ? { kind: 'position' as const, position: 0n }
      : momentFlag(typeof values.to === 'string' ? 'to' : 'at', atText);
  if (typeof values.out !== 'string') throw new ConvergeError('CONVERGE_ERR_USAGE', `audit export needs --out <file> (${usage})`);
  const out = resolve(io.cwd, values.out);
  const auditKey = typeof values['audit-pub'] === 'string' ? readAuditPub(resolve(io.cwd, values['audit-pub'])) : null;
  const declarationKey = typeof values['signing-pub'] === 'string' ? readSigningPub(resolve(io.cwd, values['signing-pub'])) : null;
  const bundle = await withStore(config, io, (store) =>
    buildEvidence(store, {
      node,
      at,
      atText,
      from,
      graceMs: config.graceMs,
      auditKey,
      declarationKey,
      unsigned: values.unsigned === true,
      now: Date.now,
    }),
  );
  const text = `${JSON.stringify(bundle)}\n`;
  writeFileSync(out, text);
  const bytes = Buffer.byteLength(text);
  const cp = bundle.checkpoint;
  if (json) {
    printJson(io, {
      out,
      bytes,
      node,
      at: bundle.at,
      from,
      signed: bundle.signed,
      tree: bundle.tree,
      checkpoint:
        cp === null ? null : { position: cp.position, size: cp.checkpoint.size, at: cp.checkpoint.at, keyId: cp.checkpoint.keyId },
      latest: bundle.latest === null ? null : { position: bundle.latest.position, size: bundle.latest.checkpoint.size },
      events: bundle.events.length,
      answer: bundle.answer,
    });
    return 0;
  }
  const a = bundle.answer;
  // The observation spans' events ride along (liveness is judged by them): counted apart, as check counts them.
  const spans = bundle.events.filter((e) => e.stream === observationStream).length;
  io.stdout(
    `wrote ${out}: ${bundle.events.length - spans} events of ${node} and ${spans} of the observation spans up to ${asOfText(bundle.at, at)}, ${bytes.toLocaleString('en-US')} bytes\n`,
  );
  io.stdout(
    cp === null
      ? `UNSIGNED: proven against the store's head (size ${bundle.tree.size}), which no checkpoint signs yet\n`
      : `proven against the checkpoint of size ${cp.checkpoint.size} signed at ${cp.checkpoint.at} by key ${cp.checkpoint.keyId} (position ${cp.position})\n`,
  );
  const latest = bundle.latest?.checkpoint.size ?? null;
  if (latest !== null && latest !== bundle.tree.size)
    io.stdout(`with a consistency proof from ${bundle.tree.size} to the latest checkpoint, size ${latest}\n`);
  if (auditKey === null) io.stdout('no --audit-pub: the bundle carries no audit key; the auditor checks it with the key they hold\n');
  io.stdout(
    `answer: ${a.status}${a.caughtUp ? ', caught up' : ''}, sent ${short(a.sentDigest)}, reported ${short(a.reportedDigest)}, ${a.liveness.state}\n`,
  );
  return 0;
}
