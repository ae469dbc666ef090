/**
 * The SQLite store's writer thread (see append-thread.ts): its own connection to the store's
 * file and a GroupCommit on it. Appends arrive from the store in batches; answers go back in one
 * message per turn of this thread's event loop.
 *
 * Durability 'full' syncs as the store's own connection would: in the background (the WAL is
 * fdatasynced on the thread pool while the next group is written; calls are answered once a
 * sync covering their group completed, and the shared CommitGate tells the store's readers what
 * is durable), or inline (synchronous=FULL: COMMIT syncs before the group becomes visible).
 */
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import type { AppendOutcome } from '../../app/store-port.js';
import { GroupCommit, type WriteCounters } from './group-commit.js';
import { prepareStatements } from './statements.js';
import { LINE_FORMAT, addChecksums } from './row-codec.js';
import { loadChecksumExtension } from './sqlite-ext.js';
import { WalSync } from './wal-sync.js';
import { configureConnection } from './open-database.js';
import { WalCheckpointer, type CheckpointCounters } from './wal-checkpointer.js';
import { SharedCommitGate, toWireError, unpackQueued, type CallAnswers, type FromWriter, type ToWriter, type WireResult, type WriterConfig } from './append-thread-wire.js';
import { answerHeapRequests } from './thread-heap.js';

const port = parentPort!;
answerHeapRequests('writer');
const config = workerData as WriterConfig;
const counters: WriteCounters = { commits: 0, groupCommits: 0, appends: 0, maxGroupSize: 0 };
const checkpoints: CheckpointCounters = { checkpoints: 0, checkpointFrames: 0 };
let results: WireResult[] = [];
let heads: (readonly [string, number, number])[] = [];
/** The durable group last reported to the store. */
let reportedDurable = 0;
let postScheduled = false;
let fatalSent = false;

const send = (m: FromWriter): void => port.postMessage(m);

/** Every call's answer, into this turn's message: an appended call as its id alone (see WireResult). */
const answers: CallAnswers = {
  resolve(outcome: AppendOutcome): void {
    results.push(outcome.kind === 'appended' ? this.id : [this.id, outcome, null]);
    schedulePost();
  },
  reject(error: unknown): void {
    results.push([this.id, null, toWireError(error)]);
    schedulePost();
  },
};

/** Answers what settled (and any durability progress) in one message, after the current turn. */
function schedulePost(): void {
  if (postScheduled) return;
  postScheduled = true;
  setImmediate(post);
}

/** The gate of the store's readers; every durability step is reported, waking waiting reads. */
class ReportingGate extends SharedCommitGate {
  override durable(group: number, feedPosition?: number): void {
    super.durable(group, feedPosition);
    schedulePost();
  }
}

const gate = config.gate === undefined ? undefined : new ReportingGate(config.gate);
const background = config.durability === 'full' && config.fullSync === 'background';
const walSync = background ? new WalSync(`${config.path}-wal`) : undefined;

/** Group commits already counted for the checkpoints. */
let countedCommits = 0;
/** Set by the close message: what is written from then on asks for no checkpoint (nor a thread). */
let closing = false;

function post(): void {
  postScheduled = false;
  if (opened !== undefined && !closing && counters.groupCommits !== countedCommits) {
    opened.checkpointer.committed(counters.groupCommits - countedCommits);
    countedCommits = counters.groupCommits;
  }
  const durable = gate?.durableUpTo() ?? 0;
  if (results.length > 0 || durable !== reportedDurable) {
    send({ kind: 'done', results, heads, counters: { ...counters }, syncs: walSync?.completed ?? 0, checkpoints: checkpoints.checkpoints });
    results = [];
    heads = [];
    reportedDurable = durable;
  }
  if (walSync?.broken === true && !fatalSent) {
    fatalSent = true;
    send({ kind: 'fatal', error: toWireError(walSync.error) });
  }
}

interface Opened {
  readonly db: Database.Database;
  readonly groups: GroupCommit;
  /** The WAL's checkpoints, off this thread (wal-checkpointer.ts). */
  readonly checkpointer: WalCheckpointer;
  /** SQLite computes the rows' checksums (sql-checksums.ts): the rows arrive without them. */
  readonly sqlChecksums: boolean;
}

function open(): Opened {
  const db = new Database(config.path, { fileMustExist: true });
  try {
    db.pragma(`busy_timeout = ${config.busyTimeoutMs}`);
    // The store's connection made the file WAL (a persistent mode) before starting this thread.
    configureConnection(db, config.durability, background);
    const sqlChecksums = config.sqlChecksums === true && loadChecksumExtension(db, 'auto', LINE_FORMAT).loaded;
    const groups = new GroupCommit(db, prepareStatements(db, false), walSync, counters, config.groupCommit, (moved) => {
      for (const h of moved) heads.push(h);
    }, gate, sqlChecksums);
    const checkpointer = new WalCheckpointer(db, { path: config.path, busyTimeoutMs: config.busyTimeoutMs }, checkpoints);
    return { db, groups, checkpointer, sqlChecksums };
  } catch (e) {
    db.close();
    throw e;
  }
}

let opened: Opened | undefined;
try {
  opened = open();
  send({ kind: 'opened' });
} catch (e) {
  send({ kind: 'open-failed', error: toWireError(e) });
  port.close();
}

port.on('message', (m: ToWriter) => {
  if (opened === undefined) return;
  const { db, groups, checkpointer, sqlChecksums } = opened;
  if (m.kind === 'append') {
    for (const packed of m.calls) {
      const call = unpackQueued(packed, answers);
      if (!sqlChecksums) addChecksums(call.rows);
      checkpointer.wrote(call.rows.length, call.dataBytes);
      groups.enqueue(call);
    }
    return;
  }
  // Close: write what is queued, wait for its sync, answer it, then close the connection.
  closing = true;
  groups.flush();
  const finish = (): void => {
    post();
    walSync?.close();
    // The checkpoint thread ends first (after its checkpoint in progress); then this connection.
    void checkpointer.close().then(() => {
      db.close();
      send({ kind: 'closed' });
      port.close();
    });
  };
  if (walSync?.owed === true) walSync.request().then(finish, finish);
  else setImmediate(finish);
});
