// @ts-check
// The folder graph of src/ is one-way: each folder names the folders it may import from.
// `npm run lint` fails on an import against it (house style: "Dependencies point one way").
import path from 'node:path';

const SRC = path.join(import.meta.dirname, 'src');

/** Folder (or root file) under src/ → what it may import besides itself. Root files not listed may import anything in src/. */
export const LAYERS = {
  core: [],
  'log.ts': [],
  'config.ts': [],
  'node-version.ts': [],
  db: ['core', 'log.ts'],
  events: ['db', 'core', 'log.ts'],
  queue: ['db', 'events', 'core', 'log.ts'],
  tasks: ['queue', 'db', 'events', 'core', 'log.ts'],
  tools: ['events', 'core', 'log.ts'],
  resources: ['tools', 'core', 'log.ts'],
  prompts: ['tools', 'core', 'log.ts'],
  // Worker threads for synchronous calls' handlers (they load the tools; the HTTP process does the rest).
  threads: ['tools', 'core', 'log.ts'],
  // Starting a tool's task from the server's side (a parent task, a schedule, a trigger).
  launch: ['tasks', 'tools', 'queue', 'events', 'db', 'core', 'log.ts'],
  worker: ['launch', 'tasks', 'tools', 'queue', 'events', 'db', 'core', 'log.ts'],
  protocol: ['launch', 'tasks', 'tools', 'resources', 'prompts', 'events', 'core', 'log.ts'],
  // The client library (`durable-mcp-tasks/client`): the wire's names, nothing of the server.
  client: ['core'],
  http: ['protocol', 'launch', 'tasks', 'tools', 'events', 'core', 'log.ts', 'config.ts'],
  // The protocol revisions, side by side: each its transport and wire over the shared method handlers.
  'rev2026-07-28': ['protocol', 'core', 'log.ts'],
  'rev2025-11-25': ['protocol', 'tasks', 'tools', 'events', 'db', 'core', 'log.ts'],
};

/**
 * Folders of src/ that only the composition root may import: the protocol revisions, each of which the
 * server can be built without (delete its folder and its lines in src/process/revisions.ts, and the
 * server of the other still builds).
 */
export const REVISIONS = { 'rev2026-07-28': ['process'], 'rev2025-11-25': ['process'] };

/** The top-level entry of src/ a file belongs to, or undefined outside src/. */
function layerOf(file) {
  const rel = path.relative(SRC, file);
  if (rel.startsWith('..') || path.isAbsolute(rel)) return undefined;
  return rel.split(path.sep)[0];
}

/** @type {import('eslint').Rule.RuleModule} */
const oneWay = {
  meta: {
    type: 'problem',
    schema: [],
    messages: { layer: '{{from}} may not import {{to}} (allowed: {{allowed}})' },
  },
  create(context) {
    const file = context.filename;
    const from = layerOf(file);
    if (from === undefined) return {};
    const check = (node, spec) => {
      if (typeof spec !== 'string' || !spec.startsWith('.')) return;
      const target = path.resolve(path.dirname(file), spec);
      const to = layerOf(target);
      if (to === from) return;
      const importers = REVISIONS[to];
      if (importers !== undefined && !importers.includes(from)) {
        context.report({
          node,
          messageId: 'layer',
          data: {
            from: `src/${from}`,
            to: `src/${to}`,
            allowed: `only ${importers.map((i) => `src/${i}`).join(', ')} may`,
          },
        });
        return;
      }
      const allowed = LAYERS[from];
      if (to === undefined) {
        context.report({
          node,
          messageId: 'layer',
          data: { from: `src/${from}`, to: spec, allowed: 'nothing outside src/' },
        });
        return;
      }
      if (allowed !== undefined && !allowed.includes(to)) {
        context.report({
          node,
          messageId: 'layer',
          data: { from: `src/${from}`, to: `src/${to}`, allowed: allowed.join(', ') || 'none' },
        });
      }
    };
    return {
      ImportDeclaration: (node) => check(node, node.source.value),
      ExportNamedDeclaration: (node) => node.source && check(node, node.source.value),
      ExportAllDeclaration: (node) => check(node, node.source.value),
      ImportExpression: (node) => node.source.type === 'Literal' && check(node, node.source.value),
    };
  },
};

export const layersPlugin = { rules: { 'one-way': oneWay } };
