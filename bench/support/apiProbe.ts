import { Worker } from 'node:worker_threads';

// API latency beside a bench's own work: a worker thread (its own event loop, so the client's
// work is not queued behind the engine's) sends GETs to the engine's API at a fixed rate, open
// loop — a request is sent on time whether or not the last one came back, so a stalled server
// shows as many slow requests, not one — and keeps when each was sent and how long it took.

export type ProbeSample = Readonly<{ path: number; at: number; ms: number; status: number }>;

export type ApiProbe = Readonly<{
  /** Stop sending; resolves with every request that came back (`at`: epoch ms it was sent). */
  stop: () => Promise<readonly ProbeSample[]>;
}>;

const worker = `
const { parentPort, workerData } = require('node:worker_threads');
const { Agent, request } = require('node:http');
const { base, paths, everyMs, maxInFlight } = workerData;
const url = new URL(base);
const agent = new Agent({ keepAlive: true, maxSockets: maxInFlight });
const samples = [];
let inFlight = 0;
let n = 0;
const t0 = performance.timeOrigin;
const timer = setInterval(() => {
  if (inFlight >= maxInFlight) return;
  const path = n++ % paths.length;
  const sent = performance.now();
  inFlight++;
  const req = request({ host: url.hostname, port: url.port, path: paths[path], agent }, (res) => {
    res.resume();
    res.on('end', () => {
      inFlight--;
      samples.push({ path, at: t0 + sent, ms: performance.now() - sent, status: res.statusCode ?? 0 });
    });
  });
  req.on('error', () => { inFlight--; samples.push({ path, at: t0 + sent, ms: performance.now() - sent, status: 0 }); });
  req.end();
}, everyMs);
parentPort.on('message', () => {
  clearInterval(timer);
  const end = () => (inFlight === 0 ? (agent.destroy(), parentPort.postMessage(samples)) : setTimeout(end, 5));
  end();
});
`;

/** Resolves once the worker runs and sends. */
export async function startApiProbe(base: string, paths: readonly string[], everyMs = 10, maxInFlight = 64): Promise<ApiProbe> {
  // No execArgv: the bench's loader hooks (tsx) in the worker would wait on the main thread's.
  const w = new Worker(worker, { eval: true, execArgv: [], workerData: { base, paths, everyMs, maxInFlight } });
  await new Promise<void>((resolve, reject) => {
    w.once('online', () => resolve());
    w.once('error', reject);
  });
  return {
    stop: () =>
      new Promise((resolve, reject) => {
        w.once('message', (samples: ProbeSample[]) => {
          void w.terminate();
          resolve(samples);
        });
        w.once('error', reject);
        w.postMessage('stop');
      }),
  };
}

/** Nearest-rank percentile of `xs` (ms); NaN when empty. */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}
