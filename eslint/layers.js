// Imports point one way, down this list (docs/architecture.md draws it from the code):
//   core → projections → {retry, metrics, tracing, turnBudget} → {store, transport} → {engine, readModel} → notify → api → app → cli,
//   and web on top.
// src/core is the pure domain (node messages, declarations, events, the rollout decision), with an
// order of its own inside it; projections/ holds the folds over its events. web/ (the dashboard) may
// point at src/api for the API's types only, which eslint.config.js enforces. This rule resolves
// every relative import (static and dynamic) of a file under src/, projections/ or web/ to the unit
// it lands in and refuses one that points to the same layer or a higher one: units in one layer do
// not import each other.
import { dirname, relative, resolve, sep } from 'node:path';

export const layers = [
  ['src/core/errors'],
  ['src/core/wire', 'src/core/declaration'],
  ['src/core/audit'],
  ['src/core/events'],
  ['src/core/rollout'],
  ['projections'],
  // Tracing is called by the engine, the read model and the API alike, and imports none of them.
  ['src/retry', 'src/metrics', 'src/tracing', 'src/turnBudget'],
  ['src/store', 'src/transport'],
  ['src/engine', 'src/readModel', 'src/simulation', 'src/brokerAdmin'],
  // Notifications hear the read model's changes, so they sit just above it.
  ['src/notify'],
  ['src/api'],
  ['src/app'],
  ['src/cli'],
  ['web'],
];

const layerOf = new Map(layers.flatMap((units, i) => units.map((u) => [u, i])));

/** `src/engine/ingest.ts` → `src/engine`; `src/core/events/make.ts` → `src/core/events`; `src/retry.ts` → `src/retry`; `projections/x.ts` → `projections`; `web/src/x.tsx` → `web`. */
export function unitOf(root, file) {
  const parts = relative(root, file).split(sep);
  const name = (p) => p.replace(/\.[cm]?[jt]s$/, '');
  if (parts[0] === 'src' && parts[1] === 'core' && parts.length >= 3) return `src/core/${name(parts[2])}`;
  if (parts[0] === 'src' && parts.length >= 2) return `src/${name(parts[1])}`;
  if (parts[0] === 'projections') return 'projections';
  if (parts[0] === 'web') return 'web';
  return null;
}

export const layersRule = {
  meta: {
    type: 'problem',
    docs: { description: 'imports point down the layers of docs/architecture.md, never up or sideways' },
    schema: [],
    messages: {
      upward: '{{from}} may not import {{to}}: imports point down, {{order}} (docs/architecture.md).',
      unknown: '{{to}} is not in a layer of eslint/layers.js: add it there before importing it.',
    },
  },
  create(context) {
    const root = context.cwd;
    const file = context.filename;
    const from = unitOf(root, file);
    if (from === null || !layerOf.has(from)) return {};
    const check = (node, source) => {
      if (typeof source !== 'string' || !source.startsWith('.')) return;
      const to = unitOf(root, resolve(dirname(file), source));
      if (to === null || to === from) return;
      if (!layerOf.has(to)) {
        context.report({ node, messageId: 'unknown', data: { to } });
        return;
      }
      if (layerOf.get(to) >= layerOf.get(from)) {
        const order = layers
          .map((l) => (l.length === 1 ? l[0] : `{${l.join(', ')}}`))
          .reverse()
          .join(' → ');
        context.report({ node, messageId: 'upward', data: { from, to, order } });
      }
    };
    return {
      ImportDeclaration: (n) => check(n.source, n.source.value),
      ExportNamedDeclaration: (n) => n.source && check(n.source, n.source.value),
      ExportAllDeclaration: (n) => check(n.source, n.source.value),
      ImportExpression: (n) => n.source.type === 'Literal' && check(n.source, n.source.value),
    };
  },
};

export default { rules: { layers: layersRule } };
