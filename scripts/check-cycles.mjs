#!/usr/bin/env node
/**
 * Import cycle check over src/ (the house style asks for one; `npm run check` runs it): builds the
 * graph of relative imports and re-exports of every .ts file (type-only imports included: a type
 * cycle is still a layering knot) and fails, listing each cycle, when the graph has one. A small
 * equivalent of `madge -c` without its dependency tree.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const dirs = process.argv.slice(2).length > 0 ? process.argv.slice(2) : ['src'];

function files(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...files(p));
    else if (p.endsWith('.ts') && !p.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

const IMPORT_RE = /(?:^|\n)\s*(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\s+from\s+)?['"](\.{1,2}\/[^'"]+)['"]/g;
const graph = new Map();
for (const d of dirs) {
  for (const file of files(join(root, d))) {
    const text = readFileSync(file, 'utf8');
    const deps = new Set();
    for (const m of text.matchAll(IMPORT_RE)) {
      const target = resolve(dirname(file), m[1].replace(/\.js$/, '.ts'));
      deps.add(target);
    }
    graph.set(file, deps);
  }
}

// Tarjan's strongly connected components: every component of more than one file is a cycle.
let index = 0;
const stack = [];
const onStack = new Set();
const idx = new Map();
const low = new Map();
const cycles = [];
function connect(v) {
  idx.set(v, index);
  low.set(v, index);
  index++;
  stack.push(v);
  onStack.add(v);
  for (const w of graph.get(v) ?? []) {
    if (!graph.has(w)) continue;
    if (!idx.has(w)) {
      connect(w);
      low.set(v, Math.min(low.get(v), low.get(w)));
    } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
  }
  if (low.get(v) === idx.get(v)) {
    const scc = [];
    let w;
    do {
      w = stack.pop();
      onStack.delete(w);
      scc.push(w);
    } while (w !== v);
    if (scc.length > 1 || graph.get(v)?.has(v)) cycles.push(scc);
  }
}
for (const v of graph.keys()) if (!idx.has(v)) connect(v);

if (cycles.length > 0) {
  for (const c of cycles) console.error(`import cycle: ${c.map((f) => relative(root, f)).sort().join(' <-> ')}`);
  console.error(`${cycles.length} import cycle(s) in ${dirs.join(', ')}; break them (move the shared part into its own module)`);
  process.exit(1);
}
console.log(`no import cycles in ${dirs.join(', ')} (${graph.size} files)`);
