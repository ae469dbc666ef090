/**
 * The reference in-memory store: the executable specification of the store port. Every other
 * store must pass the same contract suite (test/integration/store-contract.ts) with the same
 * results. Simplicity over speed, except that reads by seq use binary search so tests with large
 * logs stay quick.
 *
 * Stored events are canonical deep-frozen copies (absent optional keys absent, data copied
 * through JSON), so neither the caller's later mutation nor a reader can alter the log.
 */
import type {
  AppendOutcome,
  IdempotencyRecord,
  IdempotentResult,
  NewSession,
  ReadEventsQuery,
  SessionPage,
  SessionRecord,
  SessionStore,
  StoredEventText,
  StructuralRow,
} from '../../app/store-port.js';
import type { Json, SessionEvent, SessionHeader } from '../../domain/event.js';
import { checkPageSize, decodePageToken, encodePageToken } from '../page-token.js';
import { StoreClosedError, StoreUsageError, checkAscendingSeqs } from '../store-errors.js';
import { PoisonedEpochs } from '../poisoned-epochs.js';

/** Write counters, for tests and metrics. */
export interface StoreStats {
  /** Write transactions committed (every write operation is its own commit here). */
  readonly commits: number;
  /** `append` calls that appended events. */
  readonly appends: number;
}

interface MemorySession {
  header: SessionHeader;
  labels: Readonly<Record<string, string>>;
  tenant: string;
  strict: boolean;
  pairingGuard: boolean;
  pending: boolean;
  nextSeq: number;
  dataBytes: number;
  /** Ascending by seq (gaps possible for imported logs). */
  readonly events: SessionEvent[];
  readonly idempotency: Map<string, IdempotentResult>;
}

/** The in-memory reference implementation of {@link SessionStore}. */
export class MemorySessionStore implements SessionStore {
  private readonly sessions = new Map<string, MemorySession>();
  private closed = false;
  private commits = 0;
  private appends = 0;

  /** Write counters. */
  stats(): StoreStats {
    return { commits: this.commits, appends: this.appends };
  }

  async createSession(record: NewSession, events: readonly SessionEvent[]): Promise<boolean> {
    this.checkOpen();
    const id = record.header.id;
    if (this.sessions.has(id)) return false;
    checkAscendingSeqs(id, events, 0);
    const stored = events.map(canonicalEvent);
    const session: MemorySession = {
      header: canonicalHeader(record.header),
      labels: Object.freeze({ ...record.labels }),
      tenant: record.tenant,
      strict: record.strict,
      pairingGuard: record.pairingGuard,
      pending: record.pending === true,
      nextSeq: 0,
      dataBytes: 0,
      events: [],
      idempotency: new Map(),
    };
    this.pushEvents(session, stored);
    this.sessions.set(id, session);
    this.commits++;
    return true;
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
      .filter((s) => !s.pending)
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

  async deleteSession(id: string): Promise<boolean> {
    this.checkOpen();
    if (!this.sessions.delete(id)) return false;
    this.commits++;
    return true;
  }

  async append(
    sessionId: string,
    expectedNextSeq: number,
    events: readonly SessionEvent[],
    idempotency?: IdempotencyRecord,
    epoch?: string,
  ): Promise<AppendOutcome> {
    this.checkOpen();
    checkAscendingSeqs(sessionId, events, expectedNextSeq);
    const outcome = this.appendNow(sessionId, expectedNextSeq, events, idempotency, epoch);
    if (outcome.kind !== 'appended' && epoch !== undefined) this.poisoned.add(epoch);
    return outcome;
  }

  /** Epochs with a failed append (see SessionStore.append); bounded, oldest forgotten first. */
  private readonly poisoned = new PoisonedEpochs();

  private appendNow(
    sessionId: string,
    expectedNextSeq: number,
    events: readonly SessionEvent[],
    idempotency: IdempotencyRecord | undefined,
    epoch: string | undefined,
  ): AppendOutcome {
    const session = this.visible(sessionId);
    if (session === undefined) return { kind: 'not-found' };
    if (epoch !== undefined && this.poisoned.has(epoch)) return { kind: 'conflict', actualNextSeq: session.nextSeq };
    if (idempotency !== undefined) {
      const stored = session.idempotency.get(idempotency.key);
      if (stored !== undefined) return { kind: 'duplicate', result: stored };
    }
    if (session.nextSeq !== expectedNextSeq) return { kind: 'conflict', actualNextSeq: session.nextSeq };
    this.pushEvents(session, events.map(canonicalEvent));
    if (idempotency !== undefined) {
      const result: { seqs: readonly number[]; requestHash: string; surfaceLength?: number } = {
        seqs: Object.freeze(events.map((e) => e.seq)),
        requestHash: idempotency.requestHash,
      };
      if (idempotency.surfaceLength !== undefined) result.surfaceLength = idempotency.surfaceLength;
      session.idempotency.set(idempotency.key, Object.freeze(result));
    }
    this.commits++;
    this.appends++;
    return { kind: 'appended' };
  }

  async getIdempotent(sessionId: string, key: string): Promise<IdempotentResult | undefined> {
    this.checkOpen();
    return this.visible(sessionId)?.idempotency.get(key);
  }

  async readEvents(sessionId: string, query: ReadEventsQuery): Promise<SessionEvent[]> {
    this.checkOpen();
    const session = this.visible(sessionId);
    if (session === undefined || query.limit <= 0) return [];
    const types = query.types !== undefined && query.types.length > 0 ? new Set(query.types) : undefined;
    const events = session.events;
    const out: SessionEvent[] = [];
    if (query.direction === 'forward') {
      for (let i = lowerBound(events, query.fromSeq); i < events.length && out.length < query.limit; i++) {
        const event = events[i]!;
        if (types === undefined || types.has(event.type)) out.push(event);
      }
    } else {
      for (let i = lowerBound(events, query.fromSeq + 1) - 1; i >= 0 && out.length < query.limit; i--) {
        const event = events[i]!;
        if (types === undefined || types.has(event.type)) out.push(event);
      }
    }
    return out;
  }

  async readEventTexts(sessionId: string, query: ReadEventsQuery): Promise<StoredEventText[]> {
    return (await this.readEvents(sessionId, query)).map((e) => {
      const { data, ...rest } = e;
      return { ...rest, dataText: JSON.stringify(data) };
    });
  }

  async getEvents(sessionId: string, seqs: readonly number[]): Promise<SessionEvent[]> {
    this.checkOpen();
    const session = this.visible(sessionId);
    if (session === undefined) return [];
    const out: SessionEvent[] = [];
    for (const seq of [...new Set(seqs)].sort((a, b) => a - b)) {
      const event = session.events[lowerBound(session.events, seq)];
      if (event !== undefined && event.seq === seq) out.push(event);
    }
    return out;
  }

  async readStructure(sessionId: string, fromSeq: number, limit = Number.MAX_SAFE_INTEGER): Promise<StructuralRow[]> {
    this.checkOpen();
    const session = this.visible(sessionId);
    if (session === undefined) return [];
    const from = lowerBound(session.events, fromSeq);
    return session.events.slice(from, from + limit).map(structuralRow);
  }

  async readSurfaceStructure(sessionId: string, toSeq: number): Promise<{ rows: StructuralRow[]; headSeq: number | undefined }> {
    this.checkOpen();
    const session = this.visible(sessionId);
    if (session === undefined) return { rows: [], headSeq: undefined };
    const end = lowerBound(session.events, toSeq + 1);
    const rows: StructuralRow[] = [];
    for (let i = 0; i < end; i++) {
      const e = session.events[i] as SessionEvent;
      if (e.surfaceOp !== undefined) rows.push({ seq: e.seq, type: e.type, surfaceOp: e.surfaceOp });
    }
    return { rows, headSeq: end > 0 ? (session.events[end - 1] as SessionEvent).seq : undefined };
  }

  async *scanEvents(sessionId: string, fromSeq: number, batchSize: number): AsyncIterable<SessionEvent[]> {
    if (!Number.isSafeInteger(batchSize) || batchSize < 1) throw new RangeError(`batchSize must be a positive integer, got ${batchSize}`);
    let next = fromSeq;
    for (;;) {
      this.checkOpen();
      const session = this.visible(sessionId);
      if (session === undefined) return;
      const start = lowerBound(session.events, next);
      const batch = session.events.slice(start, start + batchSize);
      if (batch.length === 0) return;
      yield batch;
      next = batch[batch.length - 1]!.seq + 1;
    }
  }

  async publishSession(id: string): Promise<void> {
    this.checkOpen();
    const session = this.sessions.get(id);
    if (session === undefined) throw new StoreUsageError(`cannot publish session ${id}: no such pending session`);
    if (!session.pending) return;
    session.pending = false;
    this.commits++;
  }

  async appendPending(sessionId: string, events: readonly SessionEvent[]): Promise<void> {
    this.checkOpen();
    const session = this.sessions.get(sessionId);
    if (session === undefined || !session.pending) {
      throw new StoreUsageError(`cannot append an import chunk to session ${sessionId}: no such pending session`);
    }
    checkAscendingSeqs(sessionId, events, session.nextSeq);
    this.pushEvents(session, events.map(canonicalEvent));
    this.commits++;
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  private visible(id: string): MemorySession | undefined {
    const session = this.sessions.get(id);
    return session === undefined || session.pending ? undefined : session;
  }

  private pushEvents(session: MemorySession, events: readonly SessionEvent[]): void {
    for (const event of events) {
      session.events.push(event);
      session.dataBytes += Buffer.byteLength(JSON.stringify(event.data), 'utf8');
    }
    const last = events[events.length - 1];
    if (last !== undefined) session.nextSeq = last.seq + 1;
  }

  private checkOpen(): void {
    if (this.closed) throw new StoreClosedError();
  }
}

function toRecord(session: MemorySession): SessionRecord {
  return {
    header: session.header,
    labels: session.labels,
    tenant: session.tenant,
    nextSeq: session.nextSeq,
    eventCount: session.events.length,
    dataBytes: session.dataBytes,
    strict: session.strict,
    pairingGuard: session.pairingGuard,
  };
}

/** Index of the first event with seq >= `seq`. */
function lowerBound(events: readonly SessionEvent[], seq: number): number {
  let lo = 0;
  let hi = events.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (events[mid]!.seq < seq) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function structuralRow(event: SessionEvent): StructuralRow {
  const row: { seq: number; type: string; surfaceOp?: StructuralRow['surfaceOp']; sourceEventSeqs?: readonly number[]; ignorable?: true } = {
    seq: event.seq,
    type: event.type,
  };
  if (event.surfaceOp !== undefined) row.surfaceOp = event.surfaceOp;
  if (event.sourceEventSeqs !== undefined) row.sourceEventSeqs = event.sourceEventSeqs;
  if (event.ignorable === true) row.ignorable = true;
  return row;
}

/** A deep-frozen copy of `event` in the canonical key order, absent optional keys absent. */
export function canonicalEvent(event: SessionEvent): SessionEvent {
  const out: {
    type: string;
    seq: number;
    time: number;
    data: Json;
    sourceEventSeqs?: readonly number[];
    surfaceOp?: SessionEvent['surfaceOp'];
    ignorable?: true;
  } = { type: event.type, seq: event.seq, time: event.time, data: deepFreeze(JSON.parse(JSON.stringify(event.data)) as Json) };
  if (event.sourceEventSeqs !== undefined) out.sourceEventSeqs = Object.freeze([...event.sourceEventSeqs]);
  if (event.surfaceOp !== undefined) {
    out.surfaceOp =
      event.surfaceOp === 'append'
        ? 'append'
        : Object.freeze({ op: 'replace' as const, start: event.surfaceOp.start, end: event.surfaceOp.end });
  }
  if (event.ignorable === true) out.ignorable = true;
  return Object.freeze(out);
}

function canonicalHeader(header: SessionHeader): SessionHeader {
  const out: { -readonly [K in keyof SessionHeader]: SessionHeader[K] } = {
    version: header.version,
    id: header.id,
    createdAt: header.createdAt,
  };
  if (header.cwd !== undefined) out.cwd = header.cwd;
  if (header.parentSession !== undefined) out.parentSession = header.parentSession;
  if (header.seedLength !== undefined) out.seedLength = header.seedLength;
  if (header.origin !== undefined) out.origin = header.origin;
  if (header.delegationDepth !== undefined) out.delegationDepth = header.delegationDepth;
  if (header.agentPreset !== undefined) out.agentPreset = header.agentPreset;
  return Object.freeze(out);
}

function deepFreeze<T extends Json>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}
