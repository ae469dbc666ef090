/**
 * Storage failures, store-independently (issue #17, finding 4): the SQLite boundary classifies
 * engine errors into StorageError kinds, the status table maps them to STORAGE_FULL /
 * STORAGE_UNAVAILABLE without logging per request, and the storage monitor logs once per
 * episode over a fault-injecting store while reads keep being served.
 */
import { describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import Database from 'better-sqlite3';
import { SessionService, ANONYMOUS } from '../../src/app/session-service.js';
import { StorageError } from '../../src/app/storage-error.js';
import { monitorStorage } from '../../src/app/storage-monitor.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { sqliteStorageError } from '../../src/store/sqlite/sqlite-errors.js';
import { toServiceError } from '../../src/server/status-map.js';
import { fromWireError, toWireError } from '../../src/store/sqlite/append-thread-wire.js';
import { decodeError } from '../../src/client/error-details.js';
import type { CandidateEvent } from '../../src/domain/event.js';

const event = (n: number): CandidateEvent => ({ type: 'x/y', data: { n } }) as unknown as CandidateEvent;

describe('SQLite error classification', () => {
  it('full disk and I/O codes become StorageError kinds; anything else passes through', () => {
    const sq = (code: string) => new Database.SqliteError(`boom ${code}`, code);
    const io = (code: string) => Object.assign(new Error(`${code}: fs`), { code });
    for (const e of [sq('SQLITE_FULL'), io('ENOSPC')]) expect(sqliteStorageError(e)).toMatchObject({ name: 'StorageError', kind: 'full', code: e.code });
    for (const e of [sq('SQLITE_IOERR'), sq('SQLITE_IOERR_WRITE'), sq('SQLITE_IOERR_FSYNC'), sq('SQLITE_READONLY'), io('EIO'), io('EROFS')]) {
      expect(sqliteStorageError(e)).toMatchObject({ name: 'StorageError', kind: 'unavailable', code: e.code });
    }
    for (const e of [sq('SQLITE_CONSTRAINT_PRIMARYKEY'), sq('SQLITE_ERROR'), sq('SQLITE_BUSY'), new Error('plain'), 'not an error']) expect(sqliteStorageError(e)).toBe(e);
  });

  it('an error that crossed the writer thread keeps its code, and is classified the same', () => {
    const sq = (code: string) => new Database.SqliteError(`boom ${code}`, code);
    for (const [e, kind] of [[sq('SQLITE_FULL'), 'full'], [sq('SQLITE_IOERR_WRITE'), 'unavailable'], [Object.assign(new Error('EIO: fs'), { code: 'EIO' }), 'unavailable']] as const) {
      const crossed = fromWireError(structuredClone(toWireError(e)));
      expect(crossed).toMatchObject({ name: e.name, message: e.message, code: (e as { code: string }).code });
      expect(sqliteStorageError(crossed)).toMatchObject({ name: 'StorageError', kind, code: (e as { code: string }).code });
    }
    expect(sqliteStorageError(fromWireError(toWireError(sq('SQLITE_CONSTRAINT_PRIMARYKEY'))))).toMatchObject({ name: 'SqliteError', code: 'SQLITE_CONSTRAINT_PRIMARYKEY' });
  });
});

describe('status mapping', () => {
  it('STORAGE_FULL is RESOURCE_EXHAUSTED with a QuotaFailure, STORAGE_UNAVAILABLE is UNAVAILABLE; neither is logged per request', () => {
    const logged: unknown[] = [];
    const full = decodeError(toServiceError(new StorageError('full', 'SQLITE_FULL', 'disk full'), (e) => logged.push(e)));
    expect(full).toMatchObject({ code: status.RESOURCE_EXHAUSTED, reason: 'STORAGE_FULL', domain: 'palimpsest.dev' });
    expect(full.quotaFailure?.violations[0]?.subject).toBe('storage');
    const io = decodeError(toServiceError(new StorageError('unavailable', 'SQLITE_IOERR_WRITE', 'write failed'), (e) => logged.push(e)));
    expect(io).toMatchObject({ code: status.UNAVAILABLE, reason: 'STORAGE_UNAVAILABLE' });
    // The operator's message (engine details) never reaches the client.
    expect(io.message).not.toMatch(/SQLITE|write failed/);
    expect(io.message).toMatch(/nothing was stored; retry later/);
    // A failed writer thread: what was in flight may be stored, and only a restart helps.
    const thread = decodeError(toServiceError(new StorageError('unavailable', 'WRITER_THREAD_FAILED', 'the thread died'), (e) => logged.push(e)));
    expect(thread).toMatchObject({ code: status.UNAVAILABLE, reason: 'STORAGE_UNAVAILABLE' });
    expect(thread.message).toMatch(/may have been stored; restart the server, then retry with the same idempotency key/);
    expect(logged).toEqual([]);
    // An unexpected error is still INTERNAL and logged.
    expect(decodeError(toServiceError(new Error('bug'), (e) => logged.push(e))).code).toBe(status.INTERNAL);
    expect(logged).toHaveLength(1);
  });
});

/** A memory store whose writes throw `fault` while it is set (a failing disk). */
function faultyStore(): { store: MemorySessionStore; setFault(e: StorageError | undefined): void } {
  const inner = new MemorySessionStore();
  let fault: StorageError | undefined;
  const writes = new Set(['createSession', 'append', 'appendPending', 'publishSession', 'deleteSession']);
  const store = new Proxy(inner, {
    get(target, prop) {
      const v: unknown = Reflect.get(target, prop, target);
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        if (fault && writes.has(String(prop))) return Promise.reject(fault);
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store, setFault: (e) => { fault = e; } };
}

describe('storage monitor over a fault-injecting store', () => {
  it('logs a failure episode once and its recovery once; reads are served meanwhile; the log is untouched', async () => {
    const lines: { level: string; msg: string; obj: Record<string, unknown> }[] = [];
    const log = {
      error: (obj: object, msg: string) => lines.push({ level: 'error', msg, obj: obj as Record<string, unknown> }),
      warn: (obj: object, msg: string) => lines.push({ level: 'warn', msg, obj: obj as Record<string, unknown> }),
    };
    const { store, setFault } = faultyStore();
    const monitored = monitorStorage(store, log);
    const app = new SessionService(monitored, undefined, () => 1000);
    await app.createSession(ANONYMOUS, { id: 's' });
    await app.append(ANONYMOUS, 's', [event(0)]);
    setFault(new StorageError('unavailable', 'SQLITE_IOERR_WRITE', 'disk I/O error'));
    for (let i = 0; i < 10; i++) await expect(app.append(ANONYMOUS, 's', [event(i + 1)])).rejects.toBeInstanceOf(StorageError);
    await expect(app.createSession(ANONYMOUS, { id: 't' })).rejects.toMatchObject({ kind: 'unavailable' });
    expect(lines.map((l) => l.level)).toEqual(['error']);
    expect(lines[0]).toMatchObject({ obj: { kind: 'unavailable', code: 'SQLITE_IOERR_WRITE', method: 'append' } });
    expect(monitored.storageEpisodes).toMatchObject({ current: 'unavailable', failures: 11, episodes: 1 });
    // Reads are served and show only what was acknowledged.
    expect((await app.getSession(ANONYMOUS, 's')).eventCount).toBe(1);
    expect((await app.listEvents(ANONYMOUS, 's', { direction: 'forward' })).events.map((e) => e.seq)).toEqual([0]);
    // The kind changes (the disk is now full): a new episode, logged once.
    setFault(new StorageError('full', 'SQLITE_FULL', 'database or disk is full'));
    for (let i = 0; i < 3; i++) await expect(app.append(ANONYMOUS, 's', [event(1)])).rejects.toMatchObject({ kind: 'full' });
    expect(lines.map((l) => l.level)).toEqual(['error', 'error']);
    // Recovery: one line, then quiet.
    setFault(undefined);
    expect((await app.append(ANONYMOUS, 's', [event(1)])).seqs).toEqual([1]);
    expect((await app.append(ANONYMOUS, 's', [event(2)])).seqs).toEqual([2]);
    expect(lines.map((l) => l.level)).toEqual(['error', 'error', 'warn']);
    expect(lines[2]).toMatchObject({ msg: expect.stringMatching(/recovered/), obj: { kind: 'full', failedCalls: 3 } });
    expect(monitored.storageEpisodes.current).toBeUndefined();
  });
});
