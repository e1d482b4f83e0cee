import { mustBeInOrder, readMoment } from '../../projections/index.ts';
import type { At } from '../../projections/index.ts';

// A moment in a query (?at=, ?from=, ?to=): read as the CLI reads --at (projections/node/forensics.ts
// readMoment), so the two answer alike wherever each runs; a mistake is 400.

/** `query.<name>` as a moment, or 400 saying how to write one. */
export const momentQuery = (name: string, text: string): At => readMoment(`query.${name}:`, text, 'CONVERGE_ERR_BAD_REQUEST');

/** A window whose start comes after its end would answer nothing: 400, naming both ends. */
export const orderedWindowQuery = (from: Readonly<{ text: string; at: At }>, to: Readonly<{ text: string; at: At }>): void =>
  mustBeInOrder({ what: 'query.from', ...from }, { what: 'query.to', ...to }, 'CONVERGE_ERR_BAD_REQUEST');
