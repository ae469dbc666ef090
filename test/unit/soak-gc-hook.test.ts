/**
 * The soak's forced collection (scripts/soak-gc-hook.cjs) must be a full one: every soak figure
 * "after a forced GC" (RSS, live heap, malloc brk) rests on it. On node 20 the options form
 * `gc({ type: 'major', execution: 'sync' })` the hook used left the old generation's garbage (and
 * the ArrayBuffers it held) in place, so the soak's "live heap" swung by 80 MB from minute to
 * minute and garbage Buffers' malloc'd backing stores counted as growth (bench/soak.md,
 * 2026-12-05). The child below makes ~40 MB of garbage that reaches the old generation, with
 * ArrayBuffers off the V8 heap (over 64 bytes), and asks the hook for its collection.
 */
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const HOOK = fileURLToPath(new URL('../../scripts/soak-gc-hook.cjs', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'soak-gc-hook-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const CHILD = `
'use strict';
// Survives two scavenges (so it is promoted), then is dropped: old-generation garbage.
let keep = [];
for (let i = 0; i < 150000; i++) keep.push({ i, s: "x" + i, b: Buffer.allocUnsafeSlow(i % 8 === 0 ? 256 : 16) });
setTimeout(() => {
  keep = undefined;
  const m = process.memoryUsage();
  process.send({ op: 'ready', heapUsed: m.heapUsed, arrayBuffers: m.arrayBuffers });
}, 50);
setInterval(() => undefined, 1000);
`;

interface Reply { op: string; heapUsed?: number; arrayBuffers?: number; liveHeap?: number; arrayBuffersAfter?: number }

describe('soak-gc-hook', () => {
  it('collects the old generation: the live heap after it is a fraction of the garbage made', async () => {
    const file = join(dir, 'child.cjs');
    writeFileSync(file, CHILD);
    const child = fork(file, [], { execArgv: ['--expose-gc', '--require', HOOK], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    try {
      const replies: Reply[] = [];
      const next = (op: string): Promise<Reply> => new Promise((resolve) => {
        const on = (m: Reply): void => {
          if (m.op !== op) return;
          child.off('message', on);
          replies.push(m);
          resolve(m);
        };
        child.on('message', on);
      });
      const ready = await next('ready');
      const done = next('gc-done');
      // No waits: an idle process's own memory reducer would collect the garbage within them.
      child.send({ op: 'gc', id: 1, threadWaitMs: 0, settleMs: 0 });
      const after = await done;
      // The garbage was there before the collection (objects and 64-byte ArrayBuffers)...
      expect(ready.heapUsed).toBeGreaterThan(20 * 2 ** 20);
      expect(ready.arrayBuffers).toBeGreaterThan(4 * 2 ** 20);
      // ...and is gone after it (the options form left ~all of it: 40 MB of 41).
      expect(after.liveHeap).toBeLessThan(ready.heapUsed! / 4);
      expect(after.arrayBuffersAfter).toBeLessThan(ready.arrayBuffers! / 4);
    } finally {
      child.kill();
    }
  });
});
