/**
 * The blob side of the store port (issue #39, docs/blobs.md). A store that keeps content-addressed
 * blobs implements {@link BlobStorePort} next to {@link SessionStore}; the app's
 * {@link BlobbingStore} (blobbing-store.ts) does the extraction and re-inflation over it, so each
 * store only keeps a table:
 *
 *  - one blob per tenant and digest: size, media type, bytes, a checksum;
 *  - which blobs each stored event references (the write's {@link BlobWrites}), with a reference
 *    count kept in the same transaction as the events that add or remove references: a write
 *    whose events reference a blob stores the blob (if the tenant has none yet) with them, and a
 *    delete (session, pending import, retention) drops the blobs nothing references any more.
 *    So a blob never outlives its last event and an event never outlives its blobs.
 *  - The tenant byte counter (and quota) counts a blob once, when its first reference is stored,
 *    and gives it back when the last one goes; a session's own byte count has only its rows
 *    (where a blobbed value takes the size of its reference).
 */
import type { BlobPut, StoredBlob } from './blob-codec.js';
import type { EventTokenFigures } from '../domain/event-tokens.js';

export type { BlobPut, StoredBlob };

/** What a write stores besides its rows. */
export interface BlobWrites {
  /** Blobs the events reference (one per digest); those the tenant already has are not stored again. */
  readonly puts: readonly BlobPut[];
  /** Per event (by index in the write's events), the digests its stored data references (undefined = none), one per reference. */
  readonly eventBlobs: readonly (readonly string[] | undefined)[];
  /**
   * Per event (by index), its token figures (domain/event-tokens.ts) from its data as appended:
   * a store keeps these instead of figures of the stored data, whose references stand for bytes
   * the estimate counts (issue #37).
   */
  readonly tokenFigures?: readonly EventTokenFigures[];
}

/** A tenant's blob without its bytes. */
export interface BlobInfo {
  readonly digest: string;
  readonly size: number;
  readonly mediaType: string;
}

/** A slice of a tenant's blob. */
export interface BlobSlice {
  readonly info: BlobInfo;
  /** The bytes [offset, offset + length) (fewer at the end of the blob; none at or past it). */
  readonly bytes: Uint8Array;
}

/** The blob capability of a store. */
export interface BlobStorePort {
  /**
   * The blobs of `digests` of the session's tenant (missing ones omitted). A blob whose stored
   * checksum does not match its bytes throws BlobDamagedError (blob-codec.ts).
   */
  readSessionBlobs(sessionId: string, digests: readonly string[]): Promise<Map<string, StoredBlob>>;
  /** Whether any stored event of the session (pending or published) references a blob. */
  sessionHasBlobs(sessionId: string): Promise<boolean>;
  /** Which of `digests` the tenant has. */
  tenantBlobs(tenant: string, digests: readonly string[]): Promise<Map<string, BlobInfo>>;
  /**
   * A slice of the tenant's blob (`length` bytes from `offset`), or undefined when the tenant has
   * no such blob (another tenant's is exactly as missing). Checked as readSessionBlobs checks.
   */
  readBlob(tenant: string, digest: string, offset: number, length: number): Promise<BlobSlice | undefined>;
}
