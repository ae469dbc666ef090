/**
 * The WAL checkpoint thread of the SQLite writer (see wal-checkpointer.ts): its own connection to
 * the store's file, opened with the first checkpoint asked, one PASSIVE checkpoint per message.
 */
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import type { CheckpointerConfig, FromCheckpointer, ToCheckpointer } from './wal-checkpointer.js';

const port = parentPort!;
const config = workerData as CheckpointerConfig;
let db: Database.Database | undefined;

function open(): Database.Database {
  const opened = new Database(config.path, { fileMustExist: true });
  try {
    opened.pragma(`busy_timeout = ${config.busyTimeoutMs}`);
    // A checkpoint syncs the WAL before it copies frames and the database after, and marks the
    // frames copied only then (NORMAL and FULL alike in WAL mode; OFF would skip both syncs).
    opened.pragma('synchronous = NORMAL');
    // This connection commits nothing; it must never checkpoint on its own either.
    opened.pragma('wal_autocheckpoint = 0');
    return opened;
  } catch (e) {
    opened.close();
    throw e;
  }
}

port.on('message', (m: ToCheckpointer) => {
  if (m.kind === 'close') {
    db?.close();
    db = undefined;
    port.close();
    return;
  }
  let answer: FromCheckpointer;
  try {
    db ??= open();
    const [r] = db.pragma('wal_checkpoint(PASSIVE)') as { busy: number; log: number; checkpointed: number }[];
    answer = { kind: 'checkpointed', busy: r?.busy ?? 0, log: r?.log ?? 0, checkpointed: r?.checkpointed ?? 0 };
  } catch (e) {
    answer = { kind: 'failed', message: (e as Error).message };
  }
  port.postMessage(answer);
});
