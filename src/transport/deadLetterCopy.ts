import { createHash } from 'node:crypto';

// What goes to mesh.dead in place of a refused body: the body itself when it is
// small, else its first `maxBytes` with the original's size and sha256 in headers. A node can put
// anything up to the broker's max_message_size (128 MiB by default) on the wire, and a 10 MiB body
// was republished whole; an operator reading mesh.dead needs what the body was, not all of it.

/** Bytes of a refused body kept in its dead-letter copy (the wire's own limit is 256 KiB). */
export const defaultDeadLetterBodyBytes = 64 * 1024;

export type DeadLetterCopy = Readonly<{ body: Buffer; headers: Readonly<Record<string, string | number>> }>;

export function deadLetterCopy(body: Buffer, maxBytes: number = defaultDeadLetterBodyBytes): DeadLetterCopy {
  if (body.length <= maxBytes) return { body, headers: {} };
  return {
    body: body.subarray(0, maxBytes),
    headers: {
      'x-converge-original-size': body.length,
      'x-converge-original-sha256': createHash('sha256').update(body).digest('hex'),
    },
  };
}
