import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';

// The engine children the SIGKILL scenarios start and kill (ingestChild.ts, rolloutEngineChild.ts):
// each prints a line on stdout once it is ready.

/** Runs `script` (a path beside this file) under tsx with `env` added; resolves at its first line on stdout. */
export async function startFaultChild(script: string, env: Readonly<Record<string, string>>): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', new URL(script, import.meta.url).pathname], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout?.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`engine child exited with ${code} before it was ready`)));
  });
  return child;
}

/** SIGKILL, resolved once the child has exited. */
export const killHard = (child: ChildProcess): Promise<void> =>
  new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });

/** SIGTERM unless it has exited already; resolved once it has. */
export const stopGently = async (child: ChildProcess): Promise<void> => {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
};
