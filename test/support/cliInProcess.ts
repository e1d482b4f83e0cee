import { run } from '../../src/cli/main.ts';
import type { CliIo } from '../../src/cli/io.ts';

// `converge <args>` run in this process (no build needed), with its own environment and folder.

export type CliResult = Readonly<{ code: number; stdout: string; stderr: string }>;

export async function cliIn(
  cwd: string,
  args: readonly string[],
  env: Record<string, string | undefined> = {},
  stdin = '',
): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: (t) => void (stdout += t),
    stderr: (t) => void (stderr += t),
    env,
    stderrIsTTY: false,
    readStdin: async () => Buffer.from(stdin),
    cwd,
    interrupted: new Promise(() => {}),
  };
  const code = await run(args, io);
  return { code, stdout, stderr };
}
