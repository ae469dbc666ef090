/**
 * The SQLite store's writer thread (see append-thread.ts): its own connection to the store's
 * file and a GroupCommit on it. Appends arrive from the store in batches; each group transaction
 * commits with synchronous=FULL under durability 'full', so a commit is on disk before any other
 * connection can see it, and its answers go back in one message.
 */
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import type { AppendOutcome } from '../../app/store-port.js';
import { GroupCommit, type WriteCounters } from './group-commit.js';
import { prepareStatements } from './statements.js';
import { toWireError, type FromWriter, type ToWriter, type WireResult, type WriterConfig } from './append-thread-wire.js';

const port = parentPort!;
const config = workerData as WriterConfig;
const counters: WriteCounters = { commits: 0, groupCommits: 0, appends: 0, maxGroupSize: 0 };
let results: WireResult[] = [];
let heads: (readonly [string, number, number])[] = [];
let postScheduled = false;

const send = (m: FromWriter): void => port.postMessage(m);

function post(): void {
  postScheduled = false;
  if (results.length === 0) return;
  send({ kind: 'done', results, heads, counters: { ...counters } });
  results = [];
  heads = [];
}

function open(): { db: Database.Database; groups: GroupCommit } {
  const db = new Database(config.path, { fileMustExist: true });
  try {
    db.pragma(`busy_timeout = ${config.busyTimeoutMs}`);
    // The store's connection made the file WAL (a persistent mode) before starting this thread.
    // FULL: COMMIT syncs the WAL before the commit becomes visible, so what another connection
    // reads is durable, and the sync blocks this thread only.
    db.pragma(`synchronous = ${config.durability === 'normal' ? 'NORMAL' : 'FULL'}`);
    db.pragma('foreign_keys = ON');
    const groups = new GroupCommit(db, prepareStatements(db, false), undefined, counters, config.groupCommit, (moved) => {
      for (const h of moved) heads.push(h);
    });
    return { db, groups };
  } catch (e) {
    db.close();
    throw e;
  }
}

let opened: { db: Database.Database; groups: GroupCommit } | undefined;
try {
  opened = open();
} catch (e) {
  send({ kind: 'open-failed', error: toWireError(e) });
}

port.on('message', (m: ToWriter) => {
  if (opened === undefined) return;
  const { db, groups } = opened;
  if (m.kind === 'append') {
    for (const call of m.calls) {
      const id = call.id;
      groups.enqueue({
        ...call,
        resolve: (outcome: AppendOutcome) => results.push([id, outcome, null]),
        reject: (error: unknown) => results.push([id, null, toWireError(error)]),
      });
    }
    // After the group's flush (scheduled first, so it runs first): one answer for the group.
    if (!postScheduled) {
      postScheduled = true;
      setImmediate(post);
    }
    return;
  }
  groups.flush();
  post();
  db.close();
  send({ kind: 'closed' });
  port.close();
});
