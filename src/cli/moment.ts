import { readAt, windowProblem } from '../../projections/index.ts';
import type { At } from '../../projections/index.ts';
import { ConvergeError } from '../core/errors.ts';

// A moment on the command line (--at, --from, --to): read as the API reads `?at=`
// (projections/node/forensics.ts readAt); a mistake is a usage error, exit 2.

/** `--<flag> <text>` as a moment, or a usage error that says how to write one. */
export function momentFlag(flag: string, text: string): At {
  const at = readAt(text);
  if ('problem' in at) throw new ConvergeError('CONVERGE_ERR_USAGE', `--${flag} ${JSON.stringify(text)} ${at.problem}`);
  return at;
}

/** A window --from … --to whose start comes after its end would answer nothing: refused, naming both. */
export function orderedWindow(from: Readonly<{ text: string; at: At }>, to: Readonly<{ text: string; at: At }>): void {
  const problem = windowProblem(from.at, to.at);
  if (problem !== null)
    throw new ConvergeError(
      'CONVERGE_ERR_USAGE',
      `--from ${JSON.stringify(from.text)} is after --to ${JSON.stringify(to.text)}: ${problem}`,
    );
}

/** `as of <text>`, with the instant it was read as when it is a time, so the reader sees what was used. */
export const asOfText = (text: string, at: At): string => (at.kind === 'time' && at.iso !== text ? `${text} (${at.iso})` : text);
