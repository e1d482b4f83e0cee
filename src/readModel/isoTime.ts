import { isoMs } from '../core/events/index.ts';

// Parsing the ISO times the fold meets, remembering the last one: a report's time and its node's
// last-seen time are one string, and reports received in one millisecond share it
// (src/core/events/make.ts), so during a drain the last text parsed is usually the next one asked.
// Each caller keeps its own parser, so two callers interleaving do not evict each other's text.

/** A Date.parse that answers the last text again without parsing it. */
export function createIsoParser(): (text: string) => number {
  let lastText = '';
  let lastMs = NaN;
  return (text) => {
    if (text !== lastText) {
      // isoMs reads the engine's own times (Date#toISOString's) in a few comparisons, Date.parse the rest.
      const ms = isoMs(text);
      lastMs = ms === ms ? ms : Date.parse(text);
      lastText = text;
    }
    return lastMs;
  };
}
