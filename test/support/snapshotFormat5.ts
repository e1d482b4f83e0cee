import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { snapshotFormat } from '../../src/readModel/snapshot/snapshotFile.ts';

/**
 * A snapshot file as format 5 wrote it: the same file without its transitions part
 * (src/readModel/snapshot/transitions.ts). The header keeps its length, so every part keeps its
 * alignment; the trailer's sha256 is computed again.
 */
export function asFormat5(bytes: Buffer): Buffer {
  const headerEnd = bytes.indexOf(0x0a);
  const header = bytes
    .subarray(0, headerEnd)
    .toString('utf8')
    .replace(`"format":${snapshotFormat}`, '"format":5')
    .replace(',"transitions"', ' '.repeat(',"transitions"'.length));
  const part = bytes.lastIndexOf(Buffer.from('["transitions"'));
  assert.ok(part > headerEnd);
  const body = Buffer.concat([Buffer.from(header, 'utf8'), bytes.subarray(headerEnd, part - 4), Buffer.from('\n')]);
  const sha = createHash('sha256').update(body).digest('hex');
  return Buffer.concat([body, Buffer.from(`{"sha256":"${sha}"}\n`)]);
}
