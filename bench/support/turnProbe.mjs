// Preloaded into the `converge serve` that bench/soak.ts starts (node --import), when
// BENCH_TURN_PROBE_FILE names a file: the main thread's own CPU time in each event-loop turn, from
// the kernel (/proc/<pid>/task/<pid>/schedstat). A 1 ms interval timer runs once per loop
// iteration when the loop is busy, so the CPU between two ticks is what one turn held the loop
// for, whatever the machine's load; the wall-clock loop delay the engine's /metrics gives counts
// the wait for a core too, which on a shared 2-core machine is most of it. Each minute since the
// start, the turns' p99 and max go to the file (JSON, rewritten). Plain JavaScript: serve runs dist/.
import { readFileSync, writeFileSync } from 'node:fs';
import process from 'node:process';
import { setInterval } from 'node:timers';

const out = process.env['BENCH_TURN_PROBE_FILE'];
if (out !== undefined && out !== '') {
  const schedstat = `/proc/${process.pid}/task/${process.pid}/schedstat`;
  const cpuMs = () => Number(readFileSync(schedstat, 'latin1').split(' ')[0]) / 1e6;
  let last = cpuMs();
  let turns = [];
  const minutes = [];
  setInterval(() => {
    const now = cpuMs();
    turns.push(now - last);
    last = now;
  }, 1).unref();
  setInterval(() => {
    const sorted = turns.sort((a, b) => a - b);
    turns = [];
    minutes.push({ turns: sorted.length, p99: sorted[Math.floor(sorted.length * 0.99)] ?? 0, max: sorted.at(-1) ?? 0 });
    writeFileSync(out, JSON.stringify(minutes));
  }, 60_000).unref();
}
