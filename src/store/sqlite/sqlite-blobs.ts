/**
 * The SQLite store's blobs (issue #39, migrations/0006-blobs.ts, src/app/blob-port.ts): the writes that run
 * inside a store transaction (the group commit's, create's, an import chunk's) and the blob port's
 * reads. Reference counts and the freeing of unreferenced blobs are the schema's triggers.
 */
import type Database from 'better-sqlite3';
import { crc32 } from 'node:zlib';
import { BlobDamagedError } from '../../app/blob-codec.js';
import type { BlobInfo, BlobSlice, BlobStorePort, BlobWrites, StoredBlob } from '../../app/blob-port.js';
import { StoreUsageError } from '../store-errors.js';

/** The CRC-32 stored with a blob. */
export function blobCrc(bytes: Uint8Array): number {
  return crc32(bytes) | 0;
}

/** The blob statements of one connection. */
export class SqliteBlobs {
  private readonly has: Database.Statement;
  private readonly insertBlob: Database.Statement;
  private readonly insertRef: Database.Statement;
  private readonly sessionBlob: Database.Statement;
  private readonly anyRef: Database.Statement;
  private readonly info: Database.Statement;
  private readonly whole: Database.Statement;

  constructor(db: Database.Database) {
    this.has = db.prepare('SELECT 1 FROM blobs WHERE tenant = ? AND digest = ?').pluck();
    this.insertBlob = db.prepare('INSERT INTO blobs (tenant, digest, size, media_type, crc, refs, bytes) VALUES (?, ?, ?, ?, ?, 0, ?) ON CONFLICT (tenant, digest) DO NOTHING');
    this.insertRef = db.prepare('INSERT INTO event_blobs (session_id, seq, digest, tenant, n) VALUES (?, ?, ?, ?, ?)');
    this.sessionBlob = db.prepare('SELECT b.crc, b.bytes FROM sessions s JOIN blobs b ON b.tenant = s.tenant AND b.digest = ? WHERE s.id = ?').raw();
    this.anyRef = db.prepare('SELECT 1 FROM event_blobs WHERE session_id = ? LIMIT 1').pluck();
    this.info = db.prepare('SELECT size, media_type FROM blobs WHERE tenant = ? AND digest = ?').raw();
    this.whole = db.prepare('SELECT size, media_type, crc, bytes FROM blobs WHERE tenant = ? AND digest = ?').raw();
  }

  /**
   * Inside the write's transaction, before it writes: the bytes the tenant's counter grows by
   * (the blobs the events reference that the tenant has not stored). Throws StoreUsageError for a
   * reference the write does not carry and the tenant does not have.
   */
  newBytes(tenant: string, w: BlobWrites | undefined): number {
    if (w === undefined) return 0;
    let n = 0;
    const seen = new Set<string>();
    for (const digests of w.eventBlobs) {
      for (const d of digests ?? []) {
        if (seen.has(d)) continue;
        seen.add(d);
        if (this.has.get(tenant, d) !== undefined) continue;
        const put = w.puts.find((p) => p.digest === d);
        if (put === undefined) throw new StoreUsageError(`an event references blob ${d}, which the write does not carry and the tenant has not stored`);
        n += put.bytes.byteLength;
      }
    }
    return n;
  }

  /** Inside the write's transaction, with its event rows: the blobs (those the tenant has are kept) and each event's references. */
  write(tenant: string, sessionId: string, seqs: readonly number[], w: BlobWrites | undefined): void {
    if (w === undefined) return;
    const referenced = new Set<string>();
    for (const digests of w.eventBlobs) for (const d of digests ?? []) referenced.add(d);
    for (const p of w.puts) {
      if (referenced.has(p.digest)) this.insertBlob.run(tenant, p.digest, p.bytes.byteLength, p.mediaType, blobCrc(p.bytes), p.bytes);
    }
    for (let i = 0; i < w.eventBlobs.length; i++) {
      const digests = w.eventBlobs[i];
      if (digests === undefined) continue;
      const counts = new Map<string, number>();
      for (const d of digests) counts.set(d, (counts.get(d) ?? 0) + 1);
      for (const [d, n] of counts) this.insertRef.run(sessionId, seqs[i], d, tenant, n);
    }
  }

  private checked(digest: string, crc: number, bytes: Buffer): Buffer {
    if (blobCrc(bytes) !== crc) throw new BlobDamagedError(digest, 'checksum');
    return bytes;
  }

  /** The blob port's reads. */
  port(checkOpen: () => void): BlobStorePort {
    return {
      readSessionBlobs: async (sessionId, digests) => {
        checkOpen();
        const out = new Map<string, StoredBlob>();
        for (const d of digests) {
          const row = this.sessionBlob.get(d, sessionId) as [number, Buffer] | undefined;
          if (row !== undefined) out.set(d, { bytes: this.checked(d, row[0], row[1]) });
        }
        return out;
      },
      sessionHasBlobs: async (sessionId) => {
        checkOpen();
        return this.anyRef.get(sessionId) !== undefined;
      },
      tenantBlobs: async (tenant, digests) => {
        checkOpen();
        const out = new Map<string, BlobInfo>();
        for (const d of digests) {
          const row = this.info.get(tenant, d) as [number, string] | undefined;
          if (row !== undefined) out.set(d, { digest: d, size: row[0], mediaType: row[1] });
        }
        return out;
      },
      readBlob: async (tenant, digest, offset, length): Promise<BlobSlice | undefined> => {
        checkOpen();
        const row = this.whole.get(tenant, digest) as [number, string, number, Buffer] | undefined;
        if (row === undefined) return undefined;
        const bytes = this.checked(digest, row[2], row[3]);
        const start = Math.min(Math.max(0, offset), row[0]);
        return { info: { digest, size: row[0], mediaType: row[1] }, bytes: bytes.subarray(start, Math.min(row[0], start + Math.max(0, length))) };
      },
    };
  }
}
