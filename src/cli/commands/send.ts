import { validateSpec } from '../../core/declaration/index.ts';
import { createSender } from '../../engine/send.ts';
import { parseMoment, specAsOf } from '../../engine/specAsOf.ts';
import { ConvergeError } from '../../core/errors.ts';
import type { Run } from '../command.ts';
import { nodeArgument, openStore, overArchive } from '../command.ts';
import { printJson } from '../output.ts';
import { readSpecJson } from '../specFile.ts';

// Send = record (docs/design.md §2: the store is the outbox). The CLI appends the DeclarationSent; the
// relay of a running `serve` on the same store publishes it. Prints the digest.
export const run: Run = async ({ io, positionals, config, json, values }) => {
  const [node, file] = positionals as [string, string | undefined];
  nodeArgument(node);
  if (config.signingKey === null)
    throw new ConvergeError('CONVERGE_ERR_CONFIG_INVALID', 'send needs a signing key: --signing-key <pem> or CONVERGE_SIGNING_KEY');
  const asOf = typeof values['as-of'] === 'string' ? values['as-of'] : undefined;
  // A pinned node keeps its spec unless the operator insists (docs/design.md §8 "Holds and pins").
  const force = values.force === true;
  if ((asOf === undefined) === (file === undefined))
    throw new ConvergeError('CONVERGE_ERR_USAGE', 'send takes a spec file (or - for stdin) or --as-of <time|position>, exactly one');
  if (asOf !== undefined) {
    // Read and refused as rollout start --as-of is (all digits: a position; no time to come, no
    // position past the head), before anything is signed: a misread moment would be a send nobody asked for.
    const moment = parseMoment(asOf, 'CONVERGE_ERR_USAGE');
    const store = await openStore(config, io);
    try {
      // The spec may have been sent before retention moved it: read it over the archive when given one.
      const was = await specAsOf(await overArchive(config, io, store), node, moment, new Date(), 'CONVERGE_ERR_USAGE');
      const r = await createSender({ store, key: config.signingKey }).send(node, was.resources, { force });
      if (json)
        printJson(io, {
          node,
          digest: r.digest,
          serial: r.serial,
          position: r.position,
          restored: { serial: was.serial, specDigest: was.specDigest, sentAt: was.sentAt },
        });
      else io.stdout(`${r.digest}\n`);
      return 0;
    } finally {
      await store.close();
    }
  }
  const spec = await readSpecJson(io, file ?? '-');
  // The whole file is checked, so a field the spec does not have is refused, not dropped.
  const { resources } = validateSpec(spec);
  const store = await openStore(config, io);
  try {
    const r = await createSender({ store, key: config.signingKey }).send(node, resources, { force });
    if (json) printJson(io, { node, digest: r.digest, serial: r.serial, position: r.position });
    else io.stdout(`${r.digest}\n`);
    return 0;
  } finally {
    await store.close();
  }
};
