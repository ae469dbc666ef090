#!/usr/bin/env node
/**
 * One cold read for bench/blobs.mjs (issue #39), in a process of its own: opens the SQLite file
 * given, builds the service, and times the first call after start (which opens the session from
 * disk): GetSurface or GetMessages (model history). Prints one JSON line: the call's time, the
 * process's start-to-answer time, and the bytes this process read through read syscalls for it
 * (/proc/self/io rchar; the page cache may hold them, so this is what the read asked for, not
 * what the disk served).
 * `refs` is GetMessages with blob_refs (references instead of the images' bytes).
 *   node bench/blobs-cold.mjs FILE MIN_BYTES surface|messages|refs
 */
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { SessionService, ANONYMOUS, DEFAULT_LIMITS } from '../dist/src/app/session-service.js';
import { BlobbingStore } from '../dist/src/app/blobbing-store.js';
import { SqliteSessionStore } from '../dist/src/store/sqlite/sqlite-store.js';

const [path, minBytes, what] = process.argv.slice(2);
const rchar = () => {
  try {
    return Number(/rchar: (\d+)/.exec(readFileSync('/proc/self/io', 'utf8'))?.[1] ?? NaN);
  } catch {
    return NaN;
  }
};
const start = performance.now();
const store = new SqliteSessionStore({ path, durability: 'normal' });
const app = new SessionService(new BlobbingStore(store, Number(minBytes)), { ...DEFAULT_LIMITS, maxEventBytes: 8 << 20 });
const before = rchar();
const t = performance.now();
if (what === 'surface') await app.getSurface(ANONYMOUS, 'heavy');
else if (what === 'refs') await app.getMessagesPage(ANONYMOUS, 'heavy', 'model', 0, '', undefined, true); // GetMessages blob_refs: without the images' bytes
else await app.getMessages(ANONYMOUS, 'heavy', 'model');
const ms = performance.now() - t;
const read = rchar() - before;
await store.close();
console.log(JSON.stringify({ ms, total: performance.now() - start, readBytes: read }));
