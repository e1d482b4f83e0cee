import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { ConvergeError } from '../core/errors.ts';
import type { CliIo } from './io.ts';

/**
 * A spec file's JSON (`-` reads stdin), for `send` and `rollout start`. Every failure is
 * CONVERGE_ERR_SPEC_INVALID with a one-line reason naming the file; what the JSON must hold is the
 * caller's to check.
 */
export async function readSpecJson(io: CliIo, file: string): Promise<unknown> {
  const text = file === '-' ? (await io.readStdin()).toString('utf8') : readText(resolve(io.cwd, file), file);
  try {
    return JSON.parse(text);
  } catch (e) {
    // JSON.parse quotes the input, newlines included; the reason must stay one line.
    throw new ConvergeError(
      'CONVERGE_ERR_SPEC_INVALID',
      `${file === '-' ? 'stdin' : file} is not JSON: ${(e as Error).message.replace(/\s+/g, ' ')}`,
    );
  }
}

function readText(path: string, file: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (e) {
    throw new ConvergeError(
      'CONVERGE_ERR_SPEC_INVALID',
      `cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
    );
  }
}
