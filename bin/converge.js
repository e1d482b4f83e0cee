#!/usr/bin/env node
// Registers tsx so the TypeScript sources run as they are (no build step), then hands over
// to the CLI. Works from `npx converge …` after `npm install` and from `npm start`.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
await main();
