/**
 * The SQLite store's boundary classification of engine errors (see src/app/storage-error.ts):
 * SQLITE_FULL (a full disk, or max_page_count reached) and ENOSPC are `full`; SQLITE_IOERR*,
 * SQLITE_READONLY*, EIO and EROFS (a failed write, read or fsync; a remounted-read-only disk)
 * are `unavailable`. Anything else passes through unchanged (an unexpected error stays INTERNAL).
 */
import { StorageError } from '../../app/storage-error.js';

const FULL = new Set(['SQLITE_FULL', 'ENOSPC', 'EDQUOT']);
const UNAVAILABLE = new Set(['EIO', 'EROFS', 'ENXIO', 'SQLITE_CANTOPEN']);

/** `e` as a StorageError when it is a storage failure, else `e` itself. */
export function sqliteStorageError(e: unknown): unknown {
  if (e instanceof StorageError || !(e instanceof Error)) return e;
  const code = (e as { code?: unknown }).code;
  if (typeof code !== 'string') return e;
  if (FULL.has(code)) return new StorageError('full', code, `the database's disk is full (${code}: ${e.message})`, { cause: e });
  if (UNAVAILABLE.has(code) || code.startsWith('SQLITE_IOERR') || code.startsWith('SQLITE_READONLY')) {
    return new StorageError('unavailable', code, `database I/O failed (${code}: ${e.message})`, { cause: e });
  }
  return e;
}
