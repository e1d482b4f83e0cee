import { readFileSync } from 'node:fs';

// The engine stopped accepting anything when its sockets reached the process's
// descriptor limit. --max-connections keeps the API listener below it only if the limit is
// higher; serve says so at start when it is not. Linux only (/proc); elsewhere, null.

/** Descriptors the engine needs besides the API's sockets: store, broker, admin listener, files. */
export const descriptorMargin = 256;

/** The soft limit on open files of this process, or null where it cannot be read. */
export function openFilesLimit(read: () => string = () => readFileSync('/proc/self/limits', 'utf8')): number | null {
  try {
    const m = /^Max open files\s+(\d+|unlimited)\s/m.exec(read());
    if (m === null) return null;
    return m[1] === 'unlimited' ? Number.POSITIVE_INFINITY : Number(m[1]);
  } catch {
    return null;
  }
}
