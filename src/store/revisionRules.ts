import { ConvergeError } from '../core/errors.ts';
import type { ExpectedRevision } from './port.ts';

// The expected-revision check every adapter applies the same way (appendRules.ts re-exports it),
// in a file of its own so the SQLite writer thread loads it without the event schemas.

/** `current` is the revision of the stream's last event, -1n when the stream has none. */
export function expectedRevisionHolds(expected: ExpectedRevision, current: bigint): boolean {
  if (expected === 'any') return true;
  if (expected === 'no_stream') return current === -1n;
  if (expected === 'stream_exists') return current >= 0n;
  return current === expected;
}

const describe = (r: ExpectedRevision | bigint): string => (typeof r === 'bigint' ? (r < 0n ? 'no stream' : `revision ${r}`) : r);

export const wrongExpectedRevision = (stream: string, expected: ExpectedRevision, current: bigint | null, cause?: unknown): ConvergeError =>
  new ConvergeError(
    'CONVERGE_ERR_WRONG_EXPECTED_REVISION',
    `append to ${stream}: expected ${describe(expected)}, but the stream is at ${current === null ? 'an unknown revision' : describe(current)}; nothing of this call was written`,
    {
      details: { stream, expected: String(expected), current: current === null ? null : String(current) },
      ...(cause === undefined ? {} : { cause }),
    },
  );
