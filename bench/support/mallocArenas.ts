import { readFileSync } from 'node:fs';

// glibc gives each thread that allocates (libuv's pool, worker threads such as the SQLite writer
// and the signing pool) an arena of its own, mapped as a 64 MiB-aligned reservation, and keeps
// what is freed there for reuse rather than returning it. So native memory that a soak sees grow
// can be the arenas filling to their working size, not a leak: this names that share of the RSS.

const arenaAlign = 64 * 2 ** 20;
/** Below this, a region is not in the mmap area where glibc places arenas (V8 picks its own addresses). */
const mmapAreaFloor = 0x7f00_0000_0000;

/** RSS (MiB) of the anonymous read-write regions of `pid` that start on a 64 MiB boundary in the mmap area: glibc's thread arenas. */
export function mallocArenasMiB(pid: number): number {
  let kib = 0;
  let inArena = false;
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const region = /^([0-9a-f]+)-[0-9a-f]+ (\S+) \S+ \S+ (\d+)\s*(\S*)/.exec(line);
    if (region !== null) {
      const start = Number.parseInt(region[1]!, 16);
      inArena = region[2] === 'rw-p' && region[3] === '0' && region[4] === '' && start >= mmapAreaFloor && start % arenaAlign === 0;
      continue;
    }
    if (inArena && line.startsWith('Rss:')) kib += Number(/\d+/.exec(line)?.[0] ?? 0);
  }
  return kib / 1024;
}
