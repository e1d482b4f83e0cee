#!/usr/bin/env node
// The `converge` command: the compiled CLI, bundled in dist/bundle (built by `npm install`
// through `prepare`, or `npm run build`; scripts/bundle.mjs). Plain JavaScript, so starting it
// costs what node's own start costs plus the code the command asks for (src/cli/main.ts loads
// each command lazily, and each stays a chunk of its own in the bundle).
import { existsSync } from 'node:fs';

const main = new URL('../dist/bundle/cli/main.js', import.meta.url);
if (!existsSync(main)) {
  process.stderr.write('converge: dist/ is missing; run `npm run build` (npm install does it through prepare)\n');
  process.exit(1);
}
const { main: run } = await import(main.href);
await run();
