import { ConvergeError, isConvergeError } from '../core/errors.ts';
import { makeRolloutEvent, rollbackScopes, rolloutIdPattern, rolloutStreamOf } from '../core/events/index.ts';
import type { RollbackScope, RolloutEvent, WithId } from '../core/events/index.ts';
import { createUnseenPause } from './sendView.ts';
import { isTerminal } from '../core/rollout/index.ts';
import type { RolloutState } from '../core/rollout/index.ts';
import { planError, readRollout } from './rolloutStart.ts';
import type { RolloutCommandDeps } from './rolloutStart.ts';

// The operator's commands on a rollout (docs/design.md §8): start one (rolloutStart.ts), pause,
// resume, abort and roll it back. Each is one append to the rollout's own stream, at the revision
// the command read it at, so a command and the driver (src/engine/rolloutDriver.ts) never both act
// on one view: the loser re-reads and decides again. The API and the CLI call these; the driver
// does the rest (waves, sends, completion) from the events they write.

export { defaultRolloutLimits, newRolloutId, readRollout, startRollout } from './rolloutStart.ts';
export type { RolloutCommandDeps, StartRolloutDeps, StartRolloutInput, StartedRollout } from './rolloutStart.ts';

const notFound = (id: string): ConvergeError =>
  new ConvergeError('CONVERGE_ERR_ROLLOUT_NOT_FOUND', `no rollout named ${JSON.stringify(id)}`, { details: { rollout: id } });

const stateError = (s: RolloutState, message: string): ConvergeError =>
  new ConvergeError('CONVERGE_ERR_ROLLOUT_STATE', message, { details: { rollout: s.id, status: s.status } });

/**
 * Read the rollout, let `change` check it and build the one event that records the command, and
 * append it at the revision read. If the driver appended meanwhile, read again and check again
 * (a pause that raced the rollout's completion becomes a state error, not a pause of a finished
 * rollout). Resolves with the rollout as folded after the append.
 */
async function command(
  deps: RolloutCommandDeps,
  id: string,
  change: (s: RolloutState, at: string) => WithId<RolloutEvent>,
  attempts = 5,
): Promise<RolloutState> {
  if (!rolloutIdPattern.test(id)) throw notFound(id);
  const pause = createUnseenPause();
  let unseen = 0;
  for (let attempt = 1; ;) {
    const s = await readRollout(deps.store, id);
    if (s === null) throw notFound(id);
    const event = change(s, deps.now().toISOString());
    try {
      const r = await deps.store.append([{ stream: rolloutStreamOf(id), expected: s.revision, events: [event] }]);
      // Written by another caller: an identical command taken at the same revision has the same
      // id, and the store keeps it once. This one recorded nothing, so it must not answer as if
      // it had: decide again on what the other wrote (a pause then finds the rollout paused).
      if ((r.streams[0]?.written ?? 0) === 0) {
        if (attempt++ < attempts) continue;
        throw stateError(s, `rollout ${id} changed under this command ${attempts} times; nothing was recorded`);
      }
    } catch (err) {
      if (isConvergeError(err, 'CONVERGE_ERR_ROLLOUT_STATE')) throw err;
      if (!isConvergeError(err, 'CONVERGE_ERR_WRONG_EXPECTED_REVISION')) throw err;
      // Nothing new to read: the event that moved the stream waits for its group-commit sync
      // (the driver's, in serve): wait for it rather than fail 5 times in one turn (send.ts).
      const seen = (await readRollout(deps.store, id))?.revision !== s.revision;
      if (!seen && unseen++ < maxUnseen) {
        await pause(false);
        continue;
      }
      await pause(true);
      if (attempt++ < attempts) continue;
      throw err;
    }
    const after = await readRollout(deps.store, id);
    if (after === null) throw notFound(id);
    return after;
  }
}

/** Appends tried again because the stream moved by an event not readable yet, before giving up. */
const maxUnseen = 100;

const terminalWord = (s: RolloutState): string =>
  s.status === 'completed' ? 'completed' : s.status === 'halted' ? 'halted' : s.status === 'rolledBack' ? 'been rolled back' : 'aborted';

const rollingBack = (s: RolloutState, id: string, what: string): ConvergeError =>
  stateError(s, `rollout ${id} is rolling back (since ${s.rollback?.started.at ?? 'unknown'}); ${what}`);

/** Stop opening waves and sending; nodes already sent to go on converging. The open wave's timeout stops running. */
export function pauseRollout(deps: RolloutCommandDeps, id: string, by: Readonly<{ by: string; reason: string }>): Promise<RolloutState> {
  return command(deps, id, (s, at) => {
    if (isTerminal(s.status)) throw stateError(s, `rollout ${id} has ${terminalWord(s)}; there is nothing to pause`);
    if (s.status === 'rollingBack') throw rollingBack(s, id, 'a rollback is not paused (abort stops it)');
    if (s.status === 'paused') throw stateError(s, `rollout ${id} is paused already (since ${s.pausedAt ?? 'unknown'})`);
    return makeRolloutEvent('RolloutPaused', { rollout: id, by: by.by, reason: by.reason, at }, { revision: s.revision });
  });
}

/** Carry on where the pause left it. */
export function resumeRollout(deps: RolloutCommandDeps, id: string, by: Readonly<{ by: string }>): Promise<RolloutState> {
  return command(deps, id, (s, at) => {
    if (isTerminal(s.status)) throw stateError(s, `rollout ${id} has ${terminalWord(s)}; it cannot be resumed`);
    if (s.status === 'rollingBack') throw rollingBack(s, id, 'there is nothing to resume');
    if (s.status !== 'paused') throw stateError(s, `rollout ${id} is running, not paused; there is nothing to resume`);
    return makeRolloutEvent('RolloutResumed', { rollout: id, by: by.by, at }, { revision: s.revision });
  });
}

/** End the rollout for good: nothing more is sent. Declarations already sent are not taken back. */
export function abortRollout(deps: RolloutCommandDeps, id: string, by: Readonly<{ by: string; reason: string }>): Promise<RolloutState> {
  return command(deps, id, (s, at) => {
    if (isTerminal(s.status)) throw stateError(s, `rollout ${id} has ${terminalWord(s)} already; there is nothing to abort`);
    return makeRolloutEvent('RolloutAborted', { rollout: id, by: by.by, reason: by.reason, at });
  });
}

/**
 * Roll the rollout back now (docs/design.md §8, "Rollback"): its waves end, and the driver sends
 * every node this rollout sent its spec to (scope 'all', the default) or the open or last wave's
 * (scope 'wave') the declaration it had before. Any status but rolling back or rolled back allows it.
 */
export function rollbackRollout(
  deps: RolloutCommandDeps,
  id: string,
  by: Readonly<{ by: string; reason: string; scope?: RollbackScope }>,
): Promise<RolloutState> {
  const scope = by.scope ?? 'all';
  if (!rollbackScopes.includes(scope)) throw planError(`the rollback scope is wave or all (got ${JSON.stringify(scope)})`);
  return command(deps, id, (s, at) => {
    if (s.status === 'rollingBack') throw rollingBack(s, id, 'it is rolling back already');
    if (s.rollback !== null)
      throw stateError(
        s,
        `rollout ${id} was rolled back already (${s.rollback.completed?.at ?? s.rollback.started.at}); a rollout rolls back once`,
      );
    const wave = s.halted?.wave ?? s.current;
    return makeRolloutEvent('RollbackStarted', { rollout: id, scope, wave, by: by.by, reason: by.reason, at });
  });
}
