import { createProjectionRunner } from '../../readModel/projectionRunner.ts';
import { compareStates, replayStore } from '../../readModel/replay.ts';
import { readSnapshot } from '../../readModel/snapshot.ts';
import { ConvergeError } from '../../errors.ts';
import type { Run } from '../command.ts';
import { withStore } from '../command.ts';
import { makeLogger } from '../logger.ts';
import { printJson, printJsonLines, progress } from '../output.ts';

// Verify against the snapshot the engine last wrote (the persisted live read model) when there
// is one; otherwise against the engine's own incremental path (subscription + read model),
// which is what a live `serve` runs.
export const run: Run = ({ io, values, config, json }) => {
  if (values.verify !== true) throw new ConvergeError('CONVERGE_ERR_USAGE', 'replay needs --verify (it only ever reads)');
  return withStore(config, io, async (store) => {
    const head = await store.headPosition();
    const snap = config.snapshotPath === null ? null : await readSnapshot(config.snapshotPath);
    // The default snapshot beside the store may not exist yet; one the operator named must.
    const named = values.snapshot !== undefined || io.env['CONVERGE_SNAPSHOT'] !== undefined;
    if (snap === null && named)
      throw new ConvergeError('CONVERGE_ERR_SNAPSHOT_INVALID', `snapshot ${config.snapshotPath ?? ''} does not exist`);
    const p = progress(io, 'replaying');
    const replayed = await replayStore(store, {
      until: snap?.position ?? null,
      onProgress: (_n, pos) => p.update(Number(pos), head === null ? null : Number(head)),
    });
    p.done();
    let against: string;
    let actual;
    if (snap !== null) {
      against = `snapshot ${config.snapshotPath} at position ${snap.position}`;
      actual = snap.states;
    } else {
      against = 'the live projection path (subscription into the read model)';
      const runner = createProjectionRunner({ store, logger: makeLogger(config.logLevel) });
      await runner.start();
      await runner.caughtUp();
      await runner.stop();
      actual = [...runner.readModel.nodes()];
    }
    const diffs = compareStates(replayed, actual);
    if (json) {
      printJsonLines(io, diffs);
      printJson(io, { verified: diffs.length === 0, nodes: replayed.size, against, differences: diffs.length });
    } else {
      for (const d of diffs) io.stdout(`${d.node}  ${d.field}: replay=${d.expected} live=${d.actual}\n`);
      io.stdout(
        `${replayed.size} nodes replayed against ${against}: ${diffs.length === 0 ? 'no difference' : `${diffs.length} difference(s)`}\n`,
      );
    }
    if (diffs.length > 0)
      throw new ConvergeError('CONVERGE_ERR_REPLAY_MISMATCH', `replay disagrees with ${against} in ${diffs.length} field(s)`);
    return 0;
  });
};
