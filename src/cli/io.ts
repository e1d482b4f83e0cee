// What a command touches of the outside world, passed in so tests run commands in-process.
export type CliIo = Readonly<{
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  env: Readonly<Record<string, string | undefined>>;
  /** Whether stderr is a terminal (progress is drawn only then). */
  stderrIsTTY: boolean;
  readStdin: () => Promise<Buffer>;
  cwd: string;
  /** Resolves when the user asks to stop (Ctrl-C); long-running commands race it. */
  interrupted: Promise<void>;
}>;

export function processIo(): CliIo {
  let onInterrupt: () => void = () => {};
  const interrupted = new Promise<void>((r) => (onInterrupt = r));
  process.once('SIGINT', () => onInterrupt());
  process.once('SIGTERM', () => onInterrupt());
  // A reader that has what it wants (`converge status | head`) closes the pipe: the rest has no
  // one to read it, so stop quietly, with the status so far, instead of an unhandled EPIPE.
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code !== 'EPIPE') throw e;
    process.exit();
  });
  return {
    stdout: (t) => process.stdout.write(t),
    stderr: (t) => process.stderr.write(t),
    env: process.env,
    stderrIsTTY: process.stderr.isTTY === true,
    readStdin: async () => {
      const chunks: Buffer[] = [];
      for await (const c of process.stdin) chunks.push(c as Buffer);
      return Buffer.concat(chunks);
    },
    cwd: process.cwd(),
    interrupted,
  };
}
