/**
 * The in-memory store's blobs (issue #39, src/app/blob-port.ts): one blob per tenant and digest
 * with a reference count, and each session's references, changed in the same synchronous step as
 * the write or delete they belong to.
 */
import type { BlobInfo, BlobSlice, BlobStorePort, BlobWrites, StoredBlob } from '../../app/blob-port.js';
import { StoreUsageError } from '../store-errors.js';

interface MemoryBlob {
  readonly bytes: Uint8Array;
  readonly mediaType: string;
  refs: number;
}

/** The blobs of one memory database. */
export class MemoryBlobTable {
  private readonly tenants = new Map<string, Map<string, MemoryBlob>>();
  /** Storage key of a session -> digest -> references held by its events. */
  private readonly sessions = new Map<string, Map<string, number>>();

  /** Bytes a write adds to the tenant's counter: the blobs it references that the tenant has not stored. */
  newBytes(tenant: string, w: BlobWrites | undefined): number {
    if (w === undefined) return 0;
    const have = this.tenants.get(tenant);
    let n = 0;
    const seen = new Set<string>();
    for (const digests of w.eventBlobs) {
      for (const d of digests ?? []) {
        if (seen.has(d) || have?.has(d) === true) continue;
        seen.add(d);
        const put = w.puts.find((p) => p.digest === d);
        if (put === undefined) throw new StoreUsageError(`an event references blob ${d}, which the write does not carry and the tenant has not stored`);
        n += put.bytes.byteLength;
      }
    }
    return n;
  }

  /** Stores a write's references (call {@link newBytes} first: it checks that every blob is there). */
  apply(tenant: string, sessionId: string, w: BlobWrites | undefined): void {
    if (w === undefined) return;
    let have = this.tenants.get(tenant);
    let mine = this.sessions.get(sessionId);
    for (const digests of w.eventBlobs) {
      for (const d of digests ?? []) {
        if (have === undefined) this.tenants.set(tenant, (have = new Map()));
        let blob = have.get(d);
        if (blob === undefined) {
          const put = w.puts.find((p) => p.digest === d)!;
          blob = { bytes: Uint8Array.from(put.bytes), mediaType: put.mediaType, refs: 0 };
          have.set(d, blob);
        }
        blob.refs++;
        if (mine === undefined) this.sessions.set(sessionId, (mine = new Map()));
        mine.set(d, (mine.get(d) ?? 0) + 1);
      }
    }
  }

  /** Drops a removed session's references; returns the bytes of the blobs nothing references any more (now gone). */
  release(tenant: string, sessionId: string): number {
    const mine = this.sessions.get(sessionId);
    if (mine === undefined) return 0;
    this.sessions.delete(sessionId);
    const have = this.tenants.get(tenant)!;
    let freed = 0;
    for (const [d, count] of mine) {
      const blob = have.get(d)!;
      blob.refs -= count;
      if (blob.refs <= 0) {
        have.delete(d);
        freed += blob.bytes.byteLength;
      }
    }
    return freed;
  }

  /** Whether the session's events reference any blob. */
  hasRefs(sessionId: string): boolean {
    return this.sessions.has(sessionId);
  }

  /** The tenant's blob. */
  get(tenant: string, digest: string): (BlobInfo & StoredBlob) | undefined {
    const blob = this.tenants.get(tenant)?.get(digest);
    return blob === undefined ? undefined : { digest, size: blob.bytes.byteLength, mediaType: blob.mediaType, bytes: blob.bytes };
  }

  /** Every tenant's blobs and their reference counts (tests). */
  counts(): Map<string, number> {
    const out = new Map<string, number>();
    for (const [tenant, blobs] of this.tenants) for (const [d, b] of blobs) out.set(`${tenant}/${d}`, b.refs);
    return out;
  }
}

/** The blob port of a memory store instance. */
export function memoryBlobPort(table: MemoryBlobTable, tenantOf: (sessionId: string) => string | undefined, checkOpen: () => void): BlobStorePort {
  return {
    readSessionBlobs: async (sessionId, digests) => {
      checkOpen();
      const out = new Map<string, StoredBlob>();
      const tenant = tenantOf(sessionId);
      if (tenant === undefined) return out;
      for (const d of digests) {
        const b = table.get(tenant, d);
        if (b !== undefined) out.set(d, b);
      }
      return out;
    },
    sessionHasBlobs: async (sessionId) => {
      checkOpen();
      return table.hasRefs(sessionId);
    },
    tenantBlobs: async (tenant, digests) => {
      checkOpen();
      const out = new Map<string, BlobInfo>();
      for (const d of digests) {
        const b = table.get(tenant, d);
        if (b !== undefined) out.set(d, { digest: d, size: b.size, mediaType: b.mediaType });
      }
      return out;
    },
    readBlob: async (tenant, digest, offset, length): Promise<BlobSlice | undefined> => {
      checkOpen();
      const b = table.get(tenant, digest);
      if (b === undefined) return undefined;
      const start = Math.min(Math.max(0, offset), b.size);
      return { info: { digest, size: b.size, mediaType: b.mediaType }, bytes: b.bytes.slice(start, Math.min(b.size, start + Math.max(0, length))) };
    },
  };
}
