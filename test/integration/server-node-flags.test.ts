/**
 * The node options a server process starts with (SERVER_NODE_FLAGS, bench/server/bundle.ts):
 * `npm start` passes exactly them, and they still do what they are there for on this Node: a
 * floor under the old generation's allocation limit, so a small heap that keeps promoting
 * short-lived objects is collected in full far less often.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { SERVER_NODE_FLAGS } from '../../bench/server/bundle.js';

const packageJson = fileURLToPath(new URL('../../package.json', import.meta.url));

/**
 * A child that, after one full collection (the limit is then recomputed from a ~1 MB live heap),
 * promotes ~200 MB of objects that die a little later (three chunks alive at a time), and prints
 * how many full collections that took.
 */
const PROBE = `
const { PerformanceObserver, constants } = require('node:perf_hooks');
let majors = 0;
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) if (e.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR) majors++;
}).observe({ entryTypes: ['gc'] });
global.gc();
setTimeout(() => {
  majors = 0;
  let keep = [];
  for (let round = 0; round < 100; round++) {
    const chunk = [];
    for (let i = 0; i < 20000; i++) chunk.push({ i, s: 'x'.repeat(40) + i });
    keep.push(chunk);
    if (keep.length > 3) keep.shift();
  }
  keep = null;
  setTimeout(() => process.stdout.write(String(majors)), 50);
}, 20);
`;

function fullCollections(flags: readonly string[]): number {
  const r = spawnSync(process.execPath, ['--expose-gc', ...flags, '-e', PROBE], { encoding: 'utf8', timeout: 60_000 });
  expect(r.status, r.stderr).toBe(0);
  return Number(r.stdout);
}

describe('server node options', () => {
  it('npm start launches the server with exactly SERVER_NODE_FLAGS', () => {
    const pkg = JSON.parse(readFileSync(packageJson, 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts.start).toBe(`node ${SERVER_NODE_FLAGS.join(' ')} bin/palimpsest.mjs serve`);
  });

  it('the old-generation floor cuts the full collections of a small, promoting heap', () => {
    const without = fullCollections([]);
    const withFloor = fullCollections(SERVER_NODE_FLAGS);
    // Measured on Node 20 (also with four probes in parallel): 6 without, 3 with. A flag V8
    // ignored gives the same count (the collections of one program are deterministic).
    expect(without).toBeGreaterThanOrEqual(3);
    expect(withFloor).toBeLessThan(without);
  }, 120_000);
});
