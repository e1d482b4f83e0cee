import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

// The dashboard is built to static files in dist/dashboard by `npm run build`, and
// served by `converge serve` (src/api/dashboard.ts). Nothing is fetched at run time: no CDN, no
// web fonts, every byte comes from this build.
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/',
  publicDir: 'public',
  logLevel: 'warn',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: fileURLToPath(new URL('../dist/dashboard', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    // The Content-Security-Policy allows scripts from 'self' only: no inline polyfill.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    sourcemap: false,
    reportCompressedSize: false,
  },
});
