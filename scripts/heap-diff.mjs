#!/usr/bin/env node
/**
 * Diffs two V8 heap snapshots (.heapsnapshot, e.g. from `scripts/soak.mjs --heap-snapshots 2,10`)
 * by constructor: count and self size of the objects of each (node type, name), in the first and
 * the second snapshot, sorted by the growth of self size. Not retained sizes (no dominator tree):
 * a growing count of one constructor is the lead to follow.
 *
 *   node scripts/heap-diff.mjs A.heapsnapshot B.heapsnapshot [--top 40]
 */
import { readFileSync } from 'node:fs';

const [a, b] = process.argv.slice(2).filter((x) => !x.startsWith('--'));
const i = process.argv.indexOf('--top');
const TOP = i >= 0 ? Number(process.argv[i + 1]) : 40;
if (!a || !b) {
  process.stderr.write('usage: node scripts/heap-diff.mjs A.heapsnapshot B.heapsnapshot [--top N]\n');
  process.exit(2);
}

/** (type:name) -> { count, size } of one snapshot. */
function summarize(path) {
  const snap = JSON.parse(readFileSync(path, 'utf8'));
  const meta = snap.snapshot.meta;
  const fields = meta.node_fields;
  const types = meta.node_types[0];
  const F = fields.length;
  const iType = fields.indexOf('type');
  const iName = fields.indexOf('name');
  const iSize = fields.indexOf('self_size');
  const nodes = snap.nodes;
  const strings = snap.strings;
  const out = new Map();
  let total = 0;
  for (let n = 0; n < nodes.length; n += F) {
    const type = types[nodes[n + iType]];
    let name = type === 'string' || type === 'concatenated string' || type === 'sliced string' ? '(string)' : strings[nodes[n + iName]];
    if (type === 'code' || type === 'hidden' || type === 'array') name = `(${type}) ${String(name).slice(0, 60)}`;
    if (type === 'closure') name = `(closure) ${String(name).slice(0, 60)}`;
    const key = `${type}:${name}`;
    const size = nodes[n + iSize];
    total += size;
    const e = out.get(key);
    if (e) {
      e.count++;
      e.size += size;
    } else out.set(key, { count: 1, size });
  }
  return { out, total, nodes: nodes.length / F };
}

const A = summarize(a);
const B = summarize(b);
const keys = new Set([...A.out.keys(), ...B.out.keys()]);
const rows = [...keys].map((k) => {
  const x = A.out.get(k) ?? { count: 0, size: 0 };
  const y = B.out.get(k) ?? { count: 0, size: 0 };
  return { k, c0: x.count, c1: y.count, s0: x.size, s1: y.size, ds: y.size - x.size, dc: y.count - x.count };
});
const mb = (n) => (n / 2 ** 20).toFixed(2);
console.log(`A: ${A.nodes} objects, ${mb(A.total)} MB self; B: ${B.nodes} objects, ${mb(B.total)} MB self; delta ${mb(B.total - A.total)} MB`);
console.log('| constructor | count A | count B | delta count | self KB A | self KB B | delta KB |');
console.log('| --- | --- | --- | --- | --- | --- | --- |');
for (const r of rows.sort((p, q) => q.ds - p.ds).slice(0, TOP)) {
  console.log(`| ${r.k.replace(/\|/g, '\\|').replace(/\n/g, ' ')} | ${r.c0} | ${r.c1} | ${r.dc} | ${(r.s0 / 1024).toFixed(1)} | ${(r.s1 / 1024).toFixed(1)} | ${(r.ds / 1024).toFixed(1)} |`);
}
console.log('\nBy growth of count:');
for (const r of rows.sort((p, q) => q.dc - p.dc).slice(0, 20)) console.log(`  ${r.k.slice(0, 100)}: ${r.c0} -> ${r.c1} (${r.dc >= 0 ? '+' : ''}${r.dc})`);
