#!/usr/bin/env node
// After `vite build`: a brotli and a gzip copy of each text file of dist/dashboard, so the
// server (@fastify/static, preCompressed) sends compressed bytes without compressing per request.
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';

const root = new URL('../dist/dashboard/', import.meta.url).pathname;
const text = /\.(js|css|html|svg|json)$/;
let raw = 0;
let br = 0;
let gz = 0;
function walk(dir) {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p);
    else if (text.test(name)) {
      const bytes = readFileSync(p);
      const b = brotliCompressSync(bytes, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } });
      const g = gzipSync(bytes, { level: 9 });
      writeFileSync(`${p}.br`, b);
      writeFileSync(`${p}.gz`, g);
      raw += bytes.length;
      br += b.length;
      gz += g.length;
    }
  }
}
walk(root);
const kb = (n) => `${(n / 1024).toFixed(1)} KiB`;
console.log(`dashboard: ${kb(raw)} (brotli ${kb(br)}, gzip ${kb(gz)}) in dist/dashboard`);
