/**
 * The reference in-memory store: the executable specification of the store port. Every other
 * store must pass the same contract suite (test/integration/store-contract.ts) with the same
 * results. Simplicity over speed, except that reads by seq use binary search so tests with large
 * logs stay quick.
 *
 * Several store instances may share one {@link MemoryDatabase} (the in-process analogue of several
 * processes over one database file): every write is one synchronous step on the shared state, so
 * instances race exactly as connections to one database do, and the multi-writer contract tests
 * run against memory too.
 *
 * Stored events are canonical copies with their data as JSON text, in columns (event-log.ts), so
 * neither the caller's later mutation nor a reader can alter the log; reads parse the text.
 */
import type {
  AppendOutcome,
  AppendRequest,
  CreateOutcome,
  CreateQuota,
  DeleteExpectation,
  FeedQuery,
  FeedRecord,
  HeadWatch,
  PublishMetadata,
  UpdateLabelsOutcome,
  IdempotentResult,
  NewSession,
  PendingChunkOptions,
  PendingChunkOutcome,
  ReadEventsQuery,
  SessionPage,
  SessionRecord,
  SessionStore,
  StoredEventText,
  StructuralRow,
  SurfaceStructure,
  TokenFigureRows,
  TenantUsage,
} from '../../app/store-port.js';
import { labelsBytesDelta, storedSessionBytes } from '../../domain/session-bytes.js';
import type { SessionEvent } from '../../domain/event.js';
import type { BlobStorePort, BlobWrites } from '../../app/blob-port.js';
import { memoryBlobPort } from './memory-blobs.js';
import { checkPageSize, decodePageToken, encodePageToken } from '../page-token.js';
import { StoreClosedError, StoreUsageError, checkAscendingSeqs } from '../store-errors.js';
import { MemoryDatabase, type MemorySession } from './memory-database.js';
import { canonicalHeader, storedEvent, toRecord } from './memory-events.js';
import { EventLog, type EncodedBatch, type MemoryEvent } from './event-log.js';
import * as feed from './memory-feed.js';

export { MemoryDatabase } from './memory-database.js';

/** Write counters, for tests and metrics. */
export interface StoreStats {
  /** Write transactions committed by this instance (every write operation is its own commit here). */
  readonly commits: number;
  /** `append` calls of this instance that appended events. */
  readonly appends: number;
}

/** Options of {@link MemorySessionStore}. */
export interface MemoryStoreOptions {
  /** The shared state to open (default: a new, private one). */
  readonly database?: MemoryDatabase;
  /** Clock for pending-import leases (default Date.now). */
  readonly now?: () => number;
}

/** The in-memory reference implementation of {@link SessionStore}. */
export class MemorySessionStore implements SessionStore {
  /** The shared state this instance writes to. */
  readonly database: MemoryDatabase;
  private readonly sessions: Map<string, MemorySession>;
  private readonly now: () => number;
  /** The blobs (issue #39). */
  readonly blobs: BlobStorePort;
  private closed = false;
  private commits = 0;
  private appends = 0;

  constructor(options: MemoryStoreOptions = {}) {
    this.database = options.database ?? new MemoryDatabase();
    this.sessions = this.database.sessions;
    this.now = options.now ?? Date.now;
    this.blobs = memoryBlobPort(this.database.blobs, (id) => this.sessions.get(id)?.tenant, () => this.checkOpen());
    // A pending import whose owner's lease passed was abandoned (crash): remove it. Live owners'
    // imports in progress are left alone.
    const now = this.now();
    for (const [id, s] of this.sessions) if (s.pending !== undefined && s.pending.leaseUntil < now) this.remove(id, s);
  }

  /** Write counters. */
  stats(): StoreStats {
    return { commits: this.commits, appends: this.appends };
  }

  async createSession(record: NewSession, events: readonly SessionEvent[], quota?: CreateQuota, blobs?: BlobWrites): Promise<CreateOutcome> {
    this.checkOpen();
    const id = record.header.id;
    checkAscendingSeqs(id, events, 0);
    if (this.sessions.has(id)) return { kind: 'exists' };
    const stored = EventLog.encode(events, undefined, blobs?.tokenFigures);
    const header = canonicalHeader(record.header);
    const labels = Object.freeze({ ...record.labels });
    const bytes = storedSessionBytes(header, labels) + stored.dataBytes;
    const blobBytes = this.database.blobs.newBytes(record.tenant, blobs);
    const tenant = this.database.tenant(record.tenant);
    if (quota !== undefined && quota.maxSessions > 0 && tenant.sessions + 1 > quota.maxSessions) {
      return { kind: 'quota-exceeded', limitName: 'tenant_max_sessions', limit: quota.maxSessions, actual: tenant.sessions };
    }
    if (quota !== undefined && quota.maxBytes > 0 && tenant.dataBytes + bytes + blobBytes > quota.maxBytes) {
      return { kind: 'quota-exceeded', limitName: 'tenant_max_bytes', limit: quota.maxBytes, actual: tenant.dataBytes + bytes + blobBytes };
    }
    const session: MemorySession = {
      header,
      labels,
      tenant: record.tenant,
      strict: record.strict,
      pairingGuard: record.pairingGuard,
      pending: record.pending === undefined ? undefined : { owner: record.pending.owner, leaseUntil: record.pending.leaseUntil },
      writer: record.writer,
      nextSeq: 0,
      dataBytes: bytes - stored.dataBytes,
      surfaceLength: 0,
      metadataVersion: 0,
      events: new EventLog(),
      idempotency: new Map(),
    };
    this.pushEvents(session, stored);
    this.sessions.set(id, session);
    this.database.blobs.apply(record.tenant, id, blobs);
    tenant.sessions++;
    tenant.dataBytes += bytes + blobBytes;
    this.commits++;
    if (session.pending === undefined) {
      this.database.record(id, session, 'created');
      this.database.changed(this, id, session.nextSeq);
    }
    return { kind: 'created' };
  }

  async getSession(id: string): Promise<SessionRecord | undefined> {
    this.checkOpen();
    const session = this.visible(id);
    return session === undefined ? undefined : toRecord(session);
  }

  async listSessions(query: {
    tenant?: string;
    labels?: Readonly<Record<string, string>>;
    pageSize: number;
    pageToken?: string;
  }): Promise<SessionPage> {
    this.checkOpen();
    checkPageSize(query.pageSize);
    const after = query.pageToken ? decodePageToken(query.pageToken) : undefined;
    const wanted = Object.entries(query.labels ?? {});
    const matching = [...this.sessions.values()]
      .filter((s) => s.pending === undefined)
      .filter((s) => query.tenant === undefined || s.tenant === query.tenant)
      .filter((s) => wanted.every(([key, value]) => Object.hasOwn(s.labels, key) && s.labels[key] === value))
      .filter(
        (s) =>
          after === undefined ||
          s.header.createdAt < after.createdAt ||
          (s.header.createdAt === after.createdAt && s.header.id < after.id),
      )
      .sort((a, b) => b.header.createdAt - a.header.createdAt || (a.header.id < b.header.id ? 1 : a.header.id > b.header.id ? -1 : 0));
    const page = matching.slice(0, query.pageSize);
    const last = page[page.length - 1];
    return {
      sessions: page.map(toRecord),
      nextPageToken:
        matching.length > query.pageSize && last !== undefined
          ? encodePageToken({ createdAt: last.header.createdAt, id: last.header.id })
          : '',
    };
  }

  async deleteSession(id: string, expected?: DeleteExpectation): Promise<boolean> {
    this.checkOpen();
    const session = this.sessions.get(id);
    if (session === undefined) return false;
    if (expected !== undefined && (session.pending !== undefined || session.nextSeq !== expected.nextSeq || session.header.createdAt !== expected.createdAt)) return false;
    this.remove(id, session);
    this.commits++;
    if (session.pending === undefined) this.database.record(id, session, 'deleted');
    this.database.changed(this, id, 'deleted');
    return true;
  }

  async deletePending(id: string, owner: string): Promise<boolean> {
    this.checkOpen();
    const session = this.sessions.get(id);
    if (session?.pending?.owner !== owner) return false;
    this.remove(id, session);
    this.commits++;
    return true;
  }

  async append(sessionId: string, req: AppendRequest): Promise<AppendOutcome> {
    this.checkOpen();
    checkAscendingSeqs(sessionId, req.events, req.expectedNextSeq);
    const session = this.visible(sessionId);
    if (session === undefined) return { kind: 'not-found' };
    const idempotency = req.idempotency;
    if (idempotency !== undefined) {
      const stored = session.idempotency.get(idempotency.key);
      if (stored !== undefined) return { kind: 'duplicate', result: stored };
    }
    if (session.nextSeq !== req.expectedNextSeq || session.writer !== req.expectedWriter) {
      return { kind: 'conflict', actualNextSeq: session.nextSeq };
    }
    const events = EventLog.encode(req.events, req.dataTexts, req.blobs?.tokenFigures);
    const blobBytes = this.database.blobs.newBytes(session.tenant, req.blobs);
    const bytes = events.dataBytes + blobBytes;
    const tenant = this.database.tenant(session.tenant);
    const maxBytes = req.quota?.maxBytes ?? 0;
    if (maxBytes > 0 && bytes > 0 && tenant.dataBytes + bytes > maxBytes) {
      return { kind: 'quota-exceeded', limitName: 'tenant_max_bytes', limit: maxBytes, actual: tenant.dataBytes + bytes };
    }
    this.pushEvents(session, events);
    this.database.blobs.apply(session.tenant, sessionId, req.blobs);
    tenant.dataBytes += bytes;
    session.writer = req.writer;
    if (req.events.length > 0) {
      session.surfaceLength = req.surfaceLength;
      this.database.record(sessionId, session, 'appended', { eventTypes: [...new Set(req.events.map((e) => e.type))] });
    }
    if (idempotency !== undefined) {
      session.idempotency.set(
        idempotency.key,
        Object.freeze({ seqs: Object.freeze(req.events.map((e) => e.seq)), requestHash: idempotency.requestHash, surfaceLength: req.surfaceLength }),
      );
    }
    this.commits++;
    this.appends++;
    this.database.changed(this, sessionId, session.nextSeq);
    return { kind: 'appended' };
  }

  async getIdempotent(sessionId: string, key: string): Promise<IdempotentResult | undefined> {
    this.checkOpen();
    return this.visible(sessionId)?.idempotency.get(key);
  }

  async readEvents(sessionId: string, query: ReadEventsQuery): Promise<SessionEvent[]> {
    return this.selectEvents(sessionId, query).map(storedEvent);
  }

  async readEventTexts(sessionId: string, query: ReadEventsQuery): Promise<StoredEventText[]> {
    return this.selectEvents(sessionId, query);
  }

  private selectEvents(sessionId: string, query: ReadEventsQuery): MemoryEvent[] {
    this.checkOpen();
    const session = this.visible(sessionId);
    if (session === undefined || query.limit <= 0) return [];
    const types = query.types !== undefined && query.types.length > 0 ? new Set(query.types) : undefined;
    const log = session.events;
    const out: MemoryEvent[] = [];
    if (query.direction === 'forward') {
      for (let i = log.lowerBound(query.fromSeq); i < log.length && out.length < query.limit; i++) {
        if (types === undefined || types.has(log.typeAt(i))) out.push(log.at(i));
      }
    } else {
      for (let i = log.lowerBound(query.fromSeq + 1) - 1; i >= 0 && out.length < query.limit; i--) {
        if (types === undefined || types.has(log.typeAt(i))) out.push(log.at(i));
      }
    }
    return out;
  }

  async getEvents(sessionId: string, seqs: readonly number[]): Promise<SessionEvent[]> {
    this.checkOpen();
    const session = this.visible(sessionId);
    if (session === undefined) return [];
    return this.eventsBySeq(session, seqs);
  }

  async readStructure(sessionId: string, fromSeq: number, limit = Number.MAX_SAFE_INTEGER): Promise<StructuralRow[]> {
    this.checkOpen();
    const session = this.visible(sessionId);
    if (session === undefined) return [];
    const log = session.events;
    const rows: StructuralRow[] = [];
    for (let i = log.lowerBound(fromSeq); i < log.length && rows.length < limit; i++) rows.push(log.structuralAt(i));
    return rows;
  }

  /** Issue #37: the token figures kept with the events (event-log.ts). */
  async readTokenFigures(sessionId: string, fromSeq: number): Promise<TokenFigureRows> {
    this.checkOpen();
    return this.visible(sessionId)?.events.tokenFiguresFrom(fromSeq) ?? { seqs: [], tokens: [], usage: [] };
  }

  async readSurfaceStructure(sessionId: string, toSeq: number): Promise<SurfaceStructure> {
    this.checkOpen();
    const session = this.visible(sessionId);
    if (session === undefined) return { rows: [], headSeq: undefined };
    const log = session.events;
    const end = log.lowerBound(toSeq + 1);
    const rows: StructuralRow[] = [];
    for (let i = 0; i < end; i++) {
      const surfaceOp = log.surfaceOpAt(i);
      if (surfaceOp !== undefined) rows.push({ seq: log.seqAt(i), type: log.typeAt(i), surfaceOp });
    }
    return { rows, headSeq: end > 0 ? log.seqAt(end - 1) : undefined };
  }

  async *scanEvents(sessionId: string, fromSeq: number, batchSize: number): AsyncIterable<SessionEvent[]> {
    if (!Number.isSafeInteger(batchSize) || batchSize < 1) throw new RangeError(`batchSize must be a positive integer, got ${batchSize}`);
    let next = fromSeq;
    for (;;) {
      this.checkOpen();
      const session = this.visible(sessionId);
      if (session === undefined) return;
      const log = session.events;
      const batch: SessionEvent[] = [];
      for (let i = log.lowerBound(next); i < log.length && batch.length < batchSize; i++) batch.push(storedEvent(log.at(i)));
      if (batch.length === 0) return;
      yield batch;
      next = batch[batch.length - 1]!.seq + 1;
    }
  }

  async publishSession(id: string, owner: string, metadata?: PublishMetadata): Promise<void> {
    this.checkOpen();
    const session = this.ownedPending(id, owner, 'publish session');
    if (metadata !== undefined) {
      session.labels = Object.freeze({ ...metadata.labels });
      session.pairingGuard = metadata.pairingGuard;
      session.dataBytes += metadata.bytesDelta;
      this.database.tenant(session.tenant).dataBytes += metadata.bytesDelta;
    }
    session.pending = undefined;
    this.database.record(id, session, 'created');
    this.commits++;
    this.database.changed(this, id, session.nextSeq);
  }

  async appendPending(sessionId: string, events: readonly SessionEvent[], opts: PendingChunkOptions): Promise<PendingChunkOutcome> {
    this.checkOpen();
    const session = this.ownedPending(sessionId, opts.owner, 'append an import chunk to session');
    checkAscendingSeqs(sessionId, events, session.nextSeq);
    const stored = EventLog.encode(events, undefined, opts.blobs?.tokenFigures);
    const bytes = stored.dataBytes + this.database.blobs.newBytes(session.tenant, opts.blobs);
    const tenant = this.database.tenant(session.tenant);
    const maxBytes = opts.quota?.maxBytes ?? 0;
    if (maxBytes > 0 && bytes > 0 && tenant.dataBytes + bytes > maxBytes) {
      return { kind: 'quota-exceeded', limitName: 'tenant_max_bytes', limit: maxBytes, actual: tenant.dataBytes + bytes };
    }
    this.pushEvents(session, stored);
    this.database.blobs.apply(session.tenant, sessionId, opts.blobs);
    tenant.dataBytes += bytes;
    session.pending = { owner: opts.owner, leaseUntil: opts.leaseUntil };
    this.commits++;
    return { kind: 'appended' };
  }

  async getPendingEvents(sessionId: string, owner: string, seqs: readonly number[]): Promise<SessionEvent[]> {
    this.checkOpen();
    const session = this.ownedPending(sessionId, owner, 'read back the import chunks of session');
    return this.eventsBySeq(session, seqs);
  }

  async getTenantUsage(tenant: string): Promise<TenantUsage> {
    this.checkOpen();
    const t = this.database.tenants.get(tenant);
    return { sessions: t?.sessions ?? 0, dataBytes: t?.dataBytes ?? 0 };
  }

  /** Every tenant's stored session count (the palimpsest_tenant_sessions gauge). */
  async tenantSessionCounts(): Promise<ReadonlyMap<string, number>> {
    this.checkOpen();
    return new Map([...this.database.tenants].map(([tenant, t]) => [tenant, t.sessions]));
  }

  async updateLabels(id: string, labels: Readonly<Record<string, string>>, expectedVersion: number): Promise<UpdateLabelsOutcome> {
    this.checkOpen();
    const session = this.visible(id);
    if (session === undefined) return { kind: 'not-found' };
    if (session.metadataVersion !== expectedVersion) return { kind: 'version-mismatch', actual: session.metadataVersion };
    const previous = session.labels;
    const delta = labelsBytesDelta(previous, labels);
    session.labels = Object.freeze({ ...labels });
    session.metadataVersion++;
    session.dataBytes += delta;
    this.database.tenant(session.tenant).dataBytes += delta;
    this.commits++;
    this.database.record(id, session, 'labels_changed', { previousLabels: previous });
    return { kind: 'updated' };
  }

  async readFeed(query: FeedQuery): Promise<FeedRecord[]> {
    this.checkOpen();
    return feed.readFeed(this.database, query);
  }

  async feedEnd(tenant: string): Promise<number> {
    this.checkOpen();
    return feed.feedEnd(this.database, tenant);
  }

  async feedPrunedUpTo(tenant: string): Promise<number> {
    this.checkOpen();
    return feed.feedPrunedUpTo(this.database, tenant);
  }

  async pruneFeed(before: number): Promise<number> {
    this.checkOpen();
    return feed.pruneFeed(this.database, before);
  }

  openHeadWatch(): HeadWatch {
    return feed.openHeadWatch(this.database);
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  private ownedPending(id: string, owner: string, what: string): MemorySession {
    const session = this.sessions.get(id);
    if (session === undefined || session.pending === undefined) throw new StoreUsageError(`cannot ${what} ${id}: no such pending session`);
    if (session.pending.owner !== owner) {
      throw new StoreUsageError(`cannot ${what} ${id}: the pending session is owned by another importer (${session.pending.owner})`);
    }
    return session;
  }

  private remove(id: string, session: MemorySession): void {
    this.sessions.delete(id);
    const tenant = this.database.tenant(session.tenant);
    tenant.sessions--;
    tenant.dataBytes -= session.dataBytes + this.database.blobs.release(session.tenant, id);
  }

  private visible(id: string): MemorySession | undefined {
    const session = this.sessions.get(id);
    return session === undefined || session.pending !== undefined ? undefined : session;
  }

  private pushEvents(session: MemorySession, batch: EncodedBatch): void {
    session.events.push(batch);
    session.dataBytes += batch.dataBytes;
    const last = batch.events[batch.events.length - 1];
    if (last !== undefined) session.nextSeq = last.seq + 1;
  }

  /** The stored events of `seqs` (missing ones omitted), ascending. */
  private eventsBySeq(session: MemorySession, seqs: readonly number[]): SessionEvent[] {
    const log = session.events;
    const out: SessionEvent[] = [];
    for (const seq of [...new Set(seqs)].sort((a, b) => a - b)) {
      const i = log.lowerBound(seq);
      if (i < log.length && log.seqAt(i) === seq) out.push(storedEvent(log.at(i)));
    }
    return out;
  }

  private checkOpen(): void {
    if (this.closed) throw new StoreClosedError();
  }
}
