import { readAt, windowProblem } from '../../projections/index.ts';
import type { At } from '../../projections/index.ts';
import { ConvergeError } from '../core/errors.ts';

// A moment in a query (?at=, ?from=, ?to=): read as the CLI reads --at (projections/node/forensics.ts
// readAt), so the two answer alike wherever each runs; a mistake is 400.

/** `query.<name>` as a moment, or 400 saying how to write one. */
export function momentQuery(name: string, text: string): At {
  const at = readAt(text);
  if ('problem' in at) throw new ConvergeError('CONVERGE_ERR_BAD_REQUEST', `query.${name}: ${JSON.stringify(text)} ${at.problem}`);
  return at;
}

/** A window whose start comes after its end would answer nothing: 400, naming both ends. */
export function orderedWindowQuery(from: Readonly<{ text: string; at: At }>, to: Readonly<{ text: string; at: At }>): void {
  const problem = windowProblem(from.at, to.at);
  if (problem !== null)
    throw new ConvergeError(
      'CONVERGE_ERR_BAD_REQUEST',
      `query.from ${JSON.stringify(from.text)} is after query.to ${JSON.stringify(to.text)}: ${problem}`,
    );
}
