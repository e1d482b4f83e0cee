// DESIGN §4: dependencies point one way,
//   web → cli → app → api → {engine, readModel} → {store, transport, projections} → {events, wire, declaration} → errors.
// web/ (the dashboard, issue 11) sits on top: it may point at src/api for the API's types, and
// nothing in src/ may point at it. eslint.config.js further allows it type imports only.
// This rule resolves every relative import (static and dynamic) of a file under src/ or projections/
// to the folder it lands in and refuses one that points to the same layer or a higher one. A layer
// may hold several folders; folders in one layer do not import each other.
import { dirname, relative, resolve, sep } from 'node:path';

export const layers = [
  ['src/errors', 'src/retry'],
  ['src/wire', 'src/declaration'],
  ['src/events'],
  ['src/metrics', 'src/store', 'src/transport', 'projections'],
  ['src/engine', 'src/readModel', 'src/lab', 'src/accounts'],
  ['src/api'],
  ['src/app'],
  ['src/cli'],
  ['web'],
];

const layerOf = new Map(layers.flatMap((units, i) => units.map((u) => [u, i])));

/** `src/engine/ingest.ts` → `src/engine`; `src/errors.ts` → `src/errors`; `projections/x.ts` → `projections`; `web/src/x.tsx` → `web`. */
export function unitOf(root, file) {
  const parts = relative(root, file).split(sep);
  if (parts[0] === 'src' && parts.length >= 2) return `src/${parts[1].replace(/\.[cm]?[jt]s$/, '')}`;
  if (parts[0] === 'projections') return 'projections';
  if (parts[0] === 'web') return 'web';
  return null;
}

export const layersRule = {
  meta: {
    type: 'problem',
    docs: { description: 'imports point down the layers of DESIGN §4, never up or sideways' },
    schema: [],
    messages: {
      upward: '{{from}} may not import {{to}}: imports point down, {{order}} (DESIGN §4, docs/architecture.md).',
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
