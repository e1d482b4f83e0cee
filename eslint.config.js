// Lint is part of `npm test`: type-aware rules catch floating promises, which in a
// message-acking engine are how an ack goes missing or happens before a write.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import layers from './eslint/layers.js';

// src/core and projections/ reach no disk, network, clock service or logger (node:crypto only).
const pureOnly = {
  group: ['node:*', '!node:crypto', 'amqplib', 'better-sqlite3', 'pg', '@eventstore/*', 'fastify', '@fastify/*', 'pino', 'prom-client'],
  message: 'src/core and projections/ are pure: no infrastructure (docs/architecture.md).',
};

export default tseslint.config(
  { ignores: ['node_modules/**', 'data/**', 'dist/**', 'bin/**', 'scripts/**', 'eslint/**', 'eslint.config.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      // The soak's probe is plain JavaScript, preloaded into the built serve (bench/support/turnProbe.mjs).
      parserOptions: { projectService: { allowDefaultProject: ['bench/support/*.mjs'] }, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // node:test's test()/describe() return promises the runner itself awaits.
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['test', 'describe', 'it', 'suite'] }],
        },
      ],
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false, attributes: false } }],
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-imports': 'off',
    },
  },
  {
    // One direction of imports between the units of src/, projections/ and web/ (eslint/layers.js).
    files: ['src/**/*.ts', 'projections/**/*.ts', 'web/src/**/*.{ts,tsx}'],
    plugins: { converge: layers },
    rules: { 'converge/layers': 'error' },
  },
  {
    // The domain core and the folds are pure: the same input gives the same answer in the engine,
    // the CLI, a replay and an auditor's check, so they reach no disk, network, clock service or logger.
    files: ['src/core/**/*.ts', 'projections/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [pureOnly],
        },
      ],
    },
  },
  {
    // projections/ folds the core's events and may import nothing else of src/.
    files: ['projections/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['../src/*', '!../src/core'],
              message: 'projections/ may import only src/core (docs/architecture.md).',
            },
            pureOnly,
          ],
        },
      ],
    },
  },
  {
    // The dashboard runs in a browser and is bundled by Vite: it talks to the server
    // only over HTTP. It may import the API's zod schemas for their *types* (erased at build), never
    // a value from src/, projections/, zod or Node (that would put server code in the bundle).
    files: ['web/src/**/*.{ts,tsx}'],
    rules: {
      'no-restricted-globals': [
        'error',
        ...['Buffer', 'process', 'global', 'require', '__dirname', '__filename', 'setImmediate'].map((name) => ({
          name,
          message: 'web/ runs in a browser: Node globals are typed (for the shared schemas) but absent there.',
        })),
      ],
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(\\.\\./)+(src|projections)/',
              allowTypeImports: true,
              message: 'web/ may import server code for its types only (`import type`): it is bundled for the browser.',
            },
            {
              regex: '^(zod|fastify|pino|node:.*|@fastify/.*)$',
              allowTypeImports: true,
              message: 'web/ runs in a browser: no server library in the bundle.',
            },
          ],
        },
      ],
    },
  },
);
