/**
 * Appends of small ordinary events (batches of 10, in-process, memory store, no data text: the
 * path that walks data) through the BlobbingStore vs the store alone: the cost of the blob gates
 * and walks on events that hold nothing to blob (issue #39). `node bench/blobs-small.mjs` after a build.
 */
import { SessionService, ANONYMOUS } from '../dist/src/app/session-service.js';
import { BlobbingStore } from '../dist/src/app/blobbing-store.js';
import { MemorySessionStore } from '../dist/src/store/memory/memory-store.js';
const N = 20000;
async function run(wrap) {
  const inner = new MemorySessionStore();
  const app = new SessionService(wrap ? new BlobbingStore(inner, 65536) : inner);
  await app.createSession(ANONYMOUS, { id: 's' });
  const t = performance.now();
  for (let i = 0; i < N; i += 10) {
    const events = [];
    for (let k = 0; k < 10; k++) events.push({ type: 'x/note', data: { n: i + k, text: 'hello world, a small ordinary event with a little text in it' } });
    await app.append(ANONYMOUS, 's', events);
  }
  return N / ((performance.now() - t) / 1000);
}
const res = { on: [], off: [] };
for (let r = 0; r < 5; r++) { res.off.push(await run(false)); res.on.push(await run(true)); }
const med = (x) => x.sort((a, b) => a - b)[2];
console.log(`small events (batches of 10), memory store: ${med(res.on).toFixed(0)}/s through BlobbingStore vs ${med(res.off).toFixed(0)}/s without (${(med(res.on) / med(res.off)).toFixed(3)}x)`);
