/** What the SQLite store reports at start-up (main.ts calls the store's `start`). */
import type { StoreStartLog } from '../../app/store-port.js';
import type { DataCorruptedError } from '../../app/storage-error.js';
import type { ChecksumExtension } from './native-checksums.js';

/** What open found: sessions refused, an unsealed heads record, how row checksums are verified. */
export interface OpenFindings {
  readonly damagedSessions: readonly DataCorruptedError[];
  readonly headsUnsealed: string | undefined;
  readonly checksumExtension: ChecksumExtension;
}

/** Logs what open found. */
export function reportOpen(found: OpenFindings, log: StoreStartLog): void {
  for (const d of found.damagedSessions) log.error({ dataLoss: true, sessionId: d.sessionId, err: d.message }, 'DATA LOSS found at open: session refused');
  if (found.headsUnsealed !== undefined) {
    log.error({ headsUnsealed: found.headsUnsealed },
      'the session heads record is UNSEALED: lost acknowledged commits (a damaged WAL) would go unseen; check the database with `palimpsest verify --db FILE`, then re-seal with `palimpsest verify --db FILE --reseal-heads` (server stopped)');
  }
  const ext = found.checksumExtension;
  if (ext.problem !== undefined) log.warn({ checksums: 'javascript' }, ext.problem);
  else log.info({ checksums: ext.loaded ? (ext.hardwareCrc === true ? 'sqlite (crc32c instruction)' : 'sqlite (table)') : 'javascript' }, 'row checksums verified on read');
}
