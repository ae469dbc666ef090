/**
 * Blobs over any store that keeps them (issue #39, docs/blobs.md): a {@link SessionStore} that
 * hands writes to the store it wraps with their large values moved into blobs (blob-codec.ts
 * decides which, the store keeps them with the rows in one transaction, blob-port.ts), and puts
 * the bytes back into every event it reads, so everything above it (the session service, reads,
 * export, fork, compaction, subscriptions) sees exactly the events that were appended.
 *
 * A store without blobs (`blobs` undefined) is passed through untouched. Reads of a session none
 * of whose events references a blob cost one lookup (`sessionHasBlobs`); others walk the data of
 * the rows that may hold references. A reference whose blob is missing or damaged is
 * DataCorruptedError (DATA_LOSS) naming the session, the seq and the digest.
 */
import type { Json, SessionEvent } from '../domain/event.js';
import { findBlobRefs, mayHoldRefs } from '../domain/blobs.js';
import { eventTokenFigures } from '../domain/event-tokens.js';
import { deepFreeze } from '../domain/json.js';
import { BlobDamagedError, extractBatch, inflateData, type ExtractedBatch, type StoredBlob } from './blob-codec.js';
import type { BlobStorePort, BlobWrites } from './blob-port.js';
import { DataCorruptedError } from './storage-error.js';
import { hasEncodedEventPages } from './ports/capabilities.js';
import { resolveRefs } from './blob-resolve.js';
import { recordStoredForm } from './stored-form.js';
import type {
  AppendOutcome, AppendRequest, CreateOutcome, CreateQuota, DeleteExpectation, EncodedEventPage, FeedQuery, FeedRecord, HeadWatch,
  IdempotentResult, NewSession, PendingChunkOptions, PendingChunkOutcome, PublishMetadata, ReadEventsQuery, SessionPage, SessionRecord,
  SessionStore, StoredEventText, StructuralColumns, StructuralRow, SurfaceStructure, TenantUsage, TokenFigureRows, UpdateLabelsOutcome,
} from './store-port.js';

function damaged(sessionId: string, seq: number, e: BlobDamagedError): DataCorruptedError {
  return new DataCorruptedError(sessionId, seq,
    `session ${sessionId} seq ${seq}: ${e.message}; the event's data cannot be served (restore the database from a backup; \`palimpsest verify\` lists every damaged blob)`, e.digest);
}

/** Subscriptions with blob_refs send the stored form of each event (stored-form.ts). */
function recordForms(events: readonly SessionEvent[], stored: readonly SessionEvent[]): void {
  for (let i = 0; i < events.length; i++) recordStoredForm(events[i]!, stored[i]!);
}

/** The writes of extracted batch `x` of `events` (as appended: their token figures are those of the bytes, not of the references). */
function writes(x: ExtractedBatch, events: readonly SessionEvent[]): BlobWrites {
  return { puts: x.blobs, eventBlobs: x.eventBlobs, tokenFigures: events.map(eventTokenFigures) };
}

/** See the module comment. `minBytes` is `--blob-min-bytes` (0 = no new blobs; stored ones are still read). */
/** The blobs of a store that keeps none: every reference is BLOB_NOT_FOUND. */
const NO_BLOBS = async (): Promise<ReadonlyMap<string, StoredBlob>> => new Map();

export class BlobbingStore implements SessionStore {
  readonly blobs: BlobStorePort | undefined;
  readonly readEncodedEventPage?: (sessionId: string, query: ReadEventsQuery, budgetBytes: number) => Promise<EncodedEventPage | undefined>;
  readonly eventPageFormat: number | undefined;
  readonly readSurfaceStructure?: (sessionId: string, toSeq: number) => Promise<SurfaceStructure>;
  readonly readTokenFigures?: (sessionId: string, fromSeq: number) => Promise<TokenFigureRows>;
  readonly readStructureColumns?: (sessionId: string) => Promise<StructuralColumns>;
  readonly tenantSessionCounts?: () => Promise<ReadonlyMap<string, number>>;

  constructor(readonly inner: SessionStore, readonly minBytes: number) {
    this.blobs = inner.blobs;
    const encoded = hasEncodedEventPages(inner) ? inner : undefined;
    const page = encoded?.readEncodedEventPage.bind(encoded);
    this.eventPageFormat = encoded?.eventPageFormat;
    if (page !== undefined) {
      // The encoded page carries the stored text: only for sessions without references.
      // Read first, then check: a first blob appended after the check would leak its reference
      // (event_blobs commits with the rows, so a page read before it holds no reference).
      this.readEncodedEventPage = async (id, q, budget) => {
        const p = await page(id, q, budget);
        return (await this.hasBlobs(id)) ? undefined : p;
      };
    }
    if (inner.readSurfaceStructure !== undefined) this.readSurfaceStructure = inner.readSurfaceStructure.bind(inner);
    // Figures of rows holding references are -1 (the app estimates those events from this store's inflated reads).
    if (inner.readTokenFigures !== undefined) this.readTokenFigures = inner.readTokenFigures.bind(inner);
    if (inner.readStructureColumns !== undefined) this.readStructureColumns = inner.readStructureColumns.bind(inner);
    if (inner.tenantSessionCounts !== undefined) this.tenantSessionCounts = inner.tenantSessionCounts.bind(inner);
  }

  private extract(events: readonly SessionEvent[], dataTexts?: readonly (string | undefined)[]): ExtractedBatch | undefined {
    return this.blobs === undefined ? undefined : extractBatch(events, dataTexts, this.minBytes);
  }

  async createSession(record: NewSession, events: readonly SessionEvent[], quota?: CreateQuota): Promise<CreateOutcome> {
    const blobs = this.blobs;
    const r = await this.resolve(events, undefined, blobs === undefined ? NO_BLOBS
      : async (d) => new Map([...(await Promise.all(d.map(async (x) => [x, await blobs.readBlob(record.tenant, x, 0, Number.MAX_SAFE_INTEGER)] as const)))]
        .filter((e): e is [string, NonNullable<typeof e[1]>] => e[1] !== undefined)));
    const input = r?.events ?? events;
    const x = this.extract(input);
    if (x !== undefined) recordForms(input, x.events);
    return x === undefined ? this.inner.createSession(record, input, quota) : this.inner.createSession(record, x.events, quota, writes(x, input));
  }

  async append(sessionId: string, req: AppendRequest): Promise<AppendOutcome> {
    const r = await this.resolve(req.events, req.dataTexts, this.blobs === undefined ? NO_BLOBS : (d) => this.blobs!.readSessionBlobs(sessionId, d));
    const base = r === undefined ? req : { ...req, events: r.events, dataTexts: r.dataTexts };
    const x = this.extract(base.events, base.dataTexts);
    if (x !== undefined) recordForms(base.events, x.events);
    return this.inner.append(sessionId, x === undefined ? base : { ...base, events: x.events, dataTexts: x.dataTexts, blobs: writes(x, base.events) });
  }

  async appendPending(sessionId: string, events: readonly SessionEvent[], opts: PendingChunkOptions): Promise<PendingChunkOutcome> {
    const r = await this.resolve(events, undefined, this.blobs === undefined ? NO_BLOBS : (d) => this.blobs!.readSessionBlobs(sessionId, d));
    const input = r?.events ?? events;
    const x = this.extract(input);
    if (x !== undefined) recordForms(input, x.events);
    return x === undefined ? this.inner.appendPending(sessionId, input, opts) : this.inner.appendPending(sessionId, x.events, { ...opts, blobs: writes(x, input) });
  }

  /**
   * Writes that did not come through AppendEvents (import chunks, server-built batches) may hold
   * objects of the reference shape: they stand for the tenant's blob (BLOB_NOT_FOUND when it has
   * none, BLOB_REF_INVALID when it does not fit: the one resolver, blob-resolve.ts, that AppendEvents
   * uses too), so that no reference-shaped literal is ever stored (docs/blobs.md), also on a store
   * that keeps no blobs (every reference is then BLOB_NOT_FOUND). Undefined when no event holds one
   * (text-gated when the text is known).
   */
  private async resolve(
    events: readonly SessionEvent[], texts: readonly (string | undefined)[] | undefined,
    fetch: (digests: string[]) => Promise<ReadonlyMap<string, StoredBlob>>,
  ): Promise<{ events: SessionEvent[]; dataTexts: (string | undefined)[] } | undefined> {
    const resolved = await resolveRefs(events.map((e) => e.data), texts, fetch);
    if (resolved === undefined) return undefined;
    const out = events.slice();
    const dataTexts = events.map((_, i) => texts?.[i]);
    resolved.forEach((data, i) => {
      if (data === undefined) return;
      out[i] = { ...out[i]!, data };
      dataTexts[i] = undefined;
    });
    return { events: out, dataTexts };
  }

  async readEvents(sessionId: string, query: ReadEventsQuery): Promise<SessionEvent[]> {
    return this.inflateEvents(sessionId, await this.inner.readEvents(sessionId, query));
  }

  async readEventTexts(sessionId: string, query: ReadEventsQuery): Promise<StoredEventText[]> {
    const rows = await this.inner.readEventTexts(sessionId, query);
    if (rows.length === 0 || !(await this.hasBlobs(sessionId))) return rows;
    const parsed = new Map<number, Json>();
    const digests = new Map<string, number>();
    for (let i = 0; i < rows.length; i++) {
      const text = rows[i]!.dataText;
      if (!mayHoldRefs(text)) continue;
      const data = JSON.parse(text) as Json;
      const refs = findBlobRefs(data);
      if (refs.length === 0) continue;
      parsed.set(i, data);
      for (const r of refs) if (!digests.has(r.digest)) digests.set(r.digest, rows[i]!.seq);
    }
    if (parsed.size === 0) return rows;
    const blobs = await this.readBlobs(sessionId, digests);
    return rows.map((row, i) => {
      const data = parsed.get(i);
      if (data === undefined) return row;
      const { dataBytes: _dropped, ...rest } = row;
      return { ...rest, dataText: JSON.stringify(this.inflate(sessionId, row.seq, data, blobs)) };
    });
  }

  /** The rows as stored: blobbed values as their references (ListEvents with blob_refs). */
  readStoredEventTexts(sessionId: string, query: ReadEventsQuery): Promise<StoredEventText[]> {
    return this.inner.readEventTexts(sessionId, query);
  }

  /** The events as stored: blobbed values as their references (GetMessages with blob_refs). */
  getStoredEvents(sessionId: string, seqs: readonly number[]): Promise<SessionEvent[]> {
    return this.inner.getEvents(sessionId, seqs);
  }

  /** The events as stored: blobbed values as their references (GetMessages with blob_refs). */
  readStoredEvents(sessionId: string, query: ReadEventsQuery): Promise<SessionEvent[]> {
    return this.inner.readEvents(sessionId, query);
  }

  /** The events as stored: blobbed values as their references (what every store's search index reads). */
  scanStoredEvents(sessionId: string, fromSeq: number, batchSize: number): AsyncIterable<SessionEvent[]> {
    return this.inner.scanEvents(sessionId, fromSeq, batchSize);
  }

  async getEvents(sessionId: string, seqs: readonly number[]): Promise<SessionEvent[]> {
    return this.inflateEvents(sessionId, await this.inner.getEvents(sessionId, seqs));
  }

  async *scanEvents(sessionId: string, fromSeq: number, batchSize: number): AsyncIterable<SessionEvent[]> {
    // Checked after each batch is read, until the session has blobs: a live session may get its
    // first one between two batches.
    let has = false;
    for await (const batch of this.inner.scanEvents(sessionId, fromSeq, batchSize)) {
      if (!has) has = await this.hasBlobs(sessionId);
      yield has ? await this.inflateEvents(sessionId, batch, true) : batch;
    }
  }

  async getPendingEvents(sessionId: string, owner: string, seqs: readonly number[]): Promise<SessionEvent[]> {
    return this.inflateEvents(sessionId, await this.inner.getPendingEvents(sessionId, owner, seqs));
  }

  private async hasBlobs(sessionId: string): Promise<boolean> {
    return this.blobs !== undefined && (await this.blobs.sessionHasBlobs(sessionId));
  }

  /** `events` with their references inflated (the same array when none has any). */
  private async inflateEvents(sessionId: string, events: SessionEvent[], known = false): Promise<SessionEvent[]> {
    if (events.length === 0 || (!known && !(await this.hasBlobs(sessionId)))) return events;
    const refsAt: number[] = [];
    const digests = new Map<string, number>();
    for (let i = 0; i < events.length; i++) {
      const data = events[i]!.data;
      if (data === null || typeof data !== 'object') continue;
      const refs = findBlobRefs(data);
      if (refs.length === 0) continue;
      refsAt.push(i);
      for (const r of refs) if (!digests.has(r.digest)) digests.set(r.digest, events[i]!.seq);
    }
    if (refsAt.length === 0) return events;
    const blobs = await this.readBlobs(sessionId, digests);
    const out = events.slice();
    for (const i of refsAt) {
      const e = out[i]!;
      out[i] = Object.freeze({ ...e, data: deepFreeze(this.inflate(sessionId, e.seq, e.data, blobs)) });
      recordStoredForm(out[i]!, e);
    }
    return out;
  }

  /** The blobs of `digests` (each with the first seq that references it, for the error). */
  private async readBlobs(sessionId: string, digests: ReadonlyMap<string, number>): Promise<Map<string, StoredBlob>> {
    try {
      return await this.blobs!.readSessionBlobs(sessionId, [...digests.keys()]);
    } catch (e) {
      if (e instanceof BlobDamagedError) throw damaged(sessionId, digests.get(e.digest) ?? 0, e);
      throw e;
    }
  }

  private inflate(sessionId: string, seq: number, data: Json, blobs: ReadonlyMap<string, StoredBlob>): Json {
    try {
      return inflateData(data, blobs);
    } catch (e) {
      if (e instanceof BlobDamagedError) throw damaged(sessionId, seq, e);
      throw e;
    }
  }

  // Everything else passes through.
  getSession(id: string): Promise<SessionRecord | undefined> { return this.inner.getSession(id); }
  listSessions(query: Parameters<SessionStore['listSessions']>[0]): Promise<SessionPage> { return this.inner.listSessions(query); }
  deleteSession(id: string, expected?: DeleteExpectation): Promise<boolean> { return this.inner.deleteSession(id, expected); }
  deletePending(id: string, owner: string): Promise<boolean> { return this.inner.deletePending(id, owner); }
  getIdempotent(sessionId: string, key: string): Promise<IdempotentResult | undefined> { return this.inner.getIdempotent(sessionId, key); }
  readStructure(sessionId: string, fromSeq: number, limit?: number): Promise<StructuralRow[]> { return this.inner.readStructure(sessionId, fromSeq, limit); }
  publishSession(id: string, owner: string, metadata?: PublishMetadata): Promise<void> { return this.inner.publishSession(id, owner, metadata); }
  getTenantUsage(tenant: string): Promise<TenantUsage> { return this.inner.getTenantUsage(tenant); }
  readFeed(query: FeedQuery): Promise<FeedRecord[]> { return this.inner.readFeed(query); }
  feedEnd(tenant: string): Promise<number> { return this.inner.feedEnd(tenant); }
  feedPrunedUpTo(tenant: string): Promise<number> { return this.inner.feedPrunedUpTo(tenant); }
  pruneFeed(before: number): Promise<number> { return this.inner.pruneFeed(before); }
  updateLabels(id: string, labels: Readonly<Record<string, string>>, expectedVersion: number): Promise<UpdateLabelsOutcome> { return this.inner.updateLabels(id, labels, expectedVersion); }
  openHeadWatch(): HeadWatch { return this.inner.openHeadWatch(); }
  close(): Promise<void> { return this.inner.close(); }
}
