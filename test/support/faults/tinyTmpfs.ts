import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// A real full disk for the SQLite store: a tmpfs of a few hundred KiB that SQLite fills, so the
// append fails with SQLITE_FULL from the kernel rather than from a simulated throw. Mounting needs
// root (CAP_SYS_ADMIN); where that is not available this returns why, and tests skip loudly.

export type TinyTmpfs = Readonly<{ dir: string; unmount: () => void }>;

export function mountTinyTmpfs(sizeKiB: number): TinyTmpfs | { unavailable: string } {
  if (process.platform !== 'linux') return { unavailable: `tmpfs needs Linux, this is ${process.platform}` };
  if (typeof process.getuid === 'function' && process.getuid() !== 0) return { unavailable: 'mounting a tmpfs needs root' };
  const dir = mkdtempSync(join(tmpdir(), 'converge-tmpfs-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${Math.max(4, Math.floor(sizeKiB))}k,mode=0700`, 'tmpfs', dir], { stdio: 'pipe' });
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    const stderr = (e as { stderr?: Buffer }).stderr?.toString().trim();
    return { unavailable: `mount -t tmpfs failed: ${stderr || (e as Error).message}` };
  }
  let mounted = true;
  return {
    dir,
    unmount: () => {
      if (!mounted) return;
      mounted = false;
      // Lazy: a store handle that was not closed must not leave the mount (and the test) stuck.
      execFileSync('umount', ['-l', dir], { stdio: 'pipe' });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
