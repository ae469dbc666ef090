/**
 * The search index follower's thread (see search-follow-thread.ts): its own connection to the
 * store's file (read only by it) with the index file attached (search-file.ts; synchronous
 * NORMAL: the index and its marks commit together, so a crash loses at most the last batches,
 * which are followed again), running one batch (followSqliteFeed) per message, in order.
 */
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { attachSearchFile } from './search-file.js';
import { followSqliteFeed } from './search-follow.js';
import type { FollowerConfig, FromFollower, ToFollower } from './search-follow-thread.js';
import { answerHeapRequests } from './thread-heap.js';

const port = parentPort!;
answerHeapRequests('search-follower');
const config = workerData as FollowerConfig;
const send = (m: FromFollower): void => port.postMessage(m);

let db: Database.Database | undefined;
try {
  db = new Database(config.path, { fileMustExist: true });
  db.pragma(`busy_timeout = ${config.busyTimeoutMs}`);
  attachSearchFile(db, false);
} catch (e) {
  db?.close();
  db = undefined;
  send({ kind: 'failed', id: 0, message: (e as Error).message, code: (e as { code?: string }).code });
  // The thread ends: the next batch starts another one (the follower retries).
  port.close();
}

port.on('message', (m: ToFollower) => {
  if (m.kind === 'close') {
    if (db?.open === true) db.close();
    port.close();
    return;
  }
  if (db === undefined) return;
  try {
    send({ kind: 'followed', id: m.id, result: followSqliteFeed(db, m.maxEvents) });
  } catch (e) {
    send({ kind: 'failed', id: m.id, message: (e as Error).message, code: (e as { code?: string }).code });
  }
});
