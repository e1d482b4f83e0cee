#!/usr/bin/env node
// After tsc: the CLI in dist/src and the packages it imports bundled into dist/bundle/cli, which
// bin/converge.js runs (warm start). Loading serve's ~400 modules one file at a time
// (resolve, stat, read, compile each) was ~0.2 s of every start; a few files cost much less.
// Each dynamic import stays a chunk of its own (splitting), so `converge --help` still loads
// only the CLI's own code and a command only what it uses. Kept out of the bundle: native addons
// and the clients of stores and brokers a SQLite engine does not load (loaded from node_modules
// when used). Input source maps (tsc's) are chained, so the bundle's maps lead back to src/.
// manifest.json names the packages in each chunk: test/cli/lazyImports.test.ts reads it to say
// which packages a command loaded.
import { rmSync, writeFileSync } from 'node:fs';
import { build } from 'esbuild';
import { buildInfo } from './buildInfo.mjs';

const root = new URL('..', import.meta.url).pathname;
const outdir = `${root}dist/bundle/cli`;
export const external = ['better-sqlite3', 'pg', 'pg-native', 'amqplib', '@eventstore/db-client'];

// Chunk names carry a hash of their content: without this, every build left the last one's beside it.
rmSync(outdir, { recursive: true, force: true });
const result = await build({
  absWorkingDir: root,
  // The same depth as dist/src/cli: paths a module finds from its own URL (the dashboard, the replay worker, the SQLite writer thread, the signing thread) still resolve.
  entryPoints: {
    main: 'dist/src/cli/main.js',
    replayWorker: 'dist/src/cli/commands/replayWorker.js',
    sqliteWriterThread: 'dist/src/store/sqlite/sqliteWriterThread.js',
    verifyThread: 'dist/src/store/audit/verifyThread.js',
    signThread: 'dist/src/engine/signThread.js',
  },
  outdir,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  sourcemap: 'linked',
  external,
  // CommonJS packages call require(): an ES module has none of its own.
  banner: { js: "import { createRequire as __convergeRequire } from 'node:module'; const require = __convergeRequire(import.meta.url);" },
  metafile: true,
  logLevel: 'warning',
});

const packageOf = (input) => /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input)?.[1] ?? null;
const manifest = {};
for (const [file, output] of Object.entries(result.metafile.outputs)) {
  if (!file.endsWith('.js')) continue;
  const packages = new Set();
  for (const input of Object.keys(output.inputs)) {
    const p = packageOf(input);
    if (p !== null) packages.add(p);
  }
  for (const imported of output.imports)
    if (imported.external && !imported.path.startsWith('node:')) packages.add(packageOf(`node_modules/${imported.path}/`) ?? imported.path);
  manifest[file.slice(file.lastIndexOf('/') + 1)] = [...packages].sort();
}
writeFileSync(`${outdir}/manifest.json`, `${JSON.stringify(manifest, null, 1)}\n`);
// Read by `converge --version` (src/cli/version.ts) from beside main.js.
writeFileSync(`${outdir}/buildInfo.json`, `${JSON.stringify(buildInfo(root))}\n`);
