#!/usr/bin/env node
// `prepare`: build dist/ after `npm install` and `npm link`. npm 11 runs `npx converge` in this
// project by installing the project itself into npx's cache (its own bin, not a dependency's),
// and that install runs `prepare` as well: a whole build on the first call, to produce the dist/
// that is already here. So not when npm runs it for `exec`; bin/converge.js says to build if
// dist/ is missing.
import { spawnSync } from 'node:child_process';

if (process.env.npm_command === 'exec') process.exit(0);
const r = spawnSync('npm', ['run', 'build'], { stdio: 'inherit' });
process.exit(r.status ?? 1);
