import { mustBeInOrder, readMoment } from '../../projections/index.ts';
import type { At } from '../../projections/index.ts';

// A moment on the command line (--at, --from, --to): read as the API reads `?at=`
// (projections/node/forensics.ts readMoment); a mistake is a usage error, exit 2.

/** `--<flag> <text>` as a moment, or a usage error that says how to write one. */
export const momentFlag = (flag: string, text: string): At => readMoment(`--${flag}`, text, 'CONVERGE_ERR_USAGE');

/** A window --from … --to whose start comes after its end would answer nothing: refused, naming both. */
export const orderedWindow = (from: Readonly<{ text: string; at: At }>, to: Readonly<{ text: string; at: At }>): void =>
  mustBeInOrder({ what: '--from', ...from }, { what: '--to', ...to }, 'CONVERGE_ERR_USAGE');

/** `as of <text>`, with the instant it was read as when it is a time, so the reader sees what was used. */
export const asOfText = (text: string, at: At): string => (at.kind === 'time' && at.iso !== text ? `${text} (${at.iso})` : text);
