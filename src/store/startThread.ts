import { Worker } from 'node:worker_threads';
import type { WorkerOptions } from 'node:worker_threads';

// A worker thread running the module `name` beside the caller (`callerUrl`: its import.meta.url).
// From dist/ (tsc's output, or the bundle, where scripts/bundle.mjs builds each thread as an entry
// beside the chunk that holds its caller) the thread's JavaScript. From src/ (tsx: the tests, the
// benches) its source, through tsx registered in the thread: a worker does not inherit the
// parent's module hooks.
export function startThread(callerUrl: string, name: string, options: Omit<WorkerOptions, 'eval'>): Worker {
  if (!callerUrl.endsWith('.ts')) return new Worker(new URL(`./${name}.js`, callerUrl), options);
  const source = new URL(`./${name}.ts`, callerUrl).href;
  const entry = `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(source)}); });`;
  return new Worker(entry, { ...options, eval: true });
}
