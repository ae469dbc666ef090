/**
 * TEMPORARY: the store port v2 of /work/wt/PORT-V2.md, copied here until the seams branch
 * (issue #12) lands src/app/store-port.ts in that shape; then this file goes and the PostgreSQL
 * store imports the real port.
 */
import type { SessionEvent, SessionHeader, StructuralRow } from '../../domain/event.js';
import type { IdempotentResult, ReadEventsQuery, SessionPage, StoredEventText } from '../../app/store-port.js';

export type { IdempotentResult, ReadEventsQuery, SessionPage, StoredEventText, StructuralRow };

export interface SessionRecordV2 {
  readonly header: SessionHeader;
  readonly labels: Readonly<Record<string, string>>;
  readonly tenant: string;
  readonly nextSeq: number;
  readonly eventCount: number;
  readonly dataBytes: number;
  readonly strict: boolean;
  readonly pairingGuard: boolean;
  readonly writer: string;
}

export interface NewSessionV2 {
  readonly header: SessionHeader;
  readonly labels: Readonly<Record<string, string>>;
  readonly tenant: string;
  readonly strict: boolean;
  readonly pairingGuard: boolean;
  readonly writer: string;
  readonly pending?: { readonly owner: string; readonly leaseUntil: number };
}

export interface AppendRequest {
  readonly expectedNextSeq: number;
  readonly expectedWriter: string;
  readonly writer: string;
  readonly events: readonly SessionEvent[];
  readonly surfaceLength: number;
  readonly idempotency?: { readonly key: string; readonly requestHash: string };
  readonly quota?: { readonly tenant: string; readonly maxBytes: number };
}

export interface QuotaExceeded {
  readonly kind: 'quota-exceeded';
  readonly limitName: 'tenant_max_bytes' | 'tenant_max_sessions';
  readonly limit: number;
  readonly actual: number;
}

export type AppendOutcomeV2 =
  | { readonly kind: 'appended' }
  | { readonly kind: 'conflict'; readonly actualNextSeq: number }
  | { readonly kind: 'duplicate'; readonly result: IdempotentResult }
  | QuotaExceeded
  | { readonly kind: 'not-found' };

export type CreateOutcome = { readonly kind: 'created' } | { readonly kind: 'exists' } | QuotaExceeded;

export type AppendPendingOutcome = { readonly kind: 'appended' } | { readonly kind: 'not-found' } | QuotaExceeded;

export interface HeadWatch {
  watch(sessionId: string, onHead: (head: number | 'deleted') => void): () => void;
  close(): Promise<void>;
}

export interface SessionStoreV2 {
  createSession(
    record: NewSessionV2,
    events: readonly SessionEvent[],
    quota?: { readonly maxSessions: number; readonly maxBytes: number },
  ): Promise<CreateOutcome>;
  getSession(id: string): Promise<SessionRecordV2 | undefined>;
  listSessions(query: { tenant?: string; labels?: Readonly<Record<string, string>>; pageSize: number; pageToken?: string }): Promise<SessionPage>;
  deleteSession(id: string): Promise<boolean>;
  append(sessionId: string, req: AppendRequest): Promise<AppendOutcomeV2>;
  getIdempotent(sessionId: string, key: string): Promise<IdempotentResult | undefined>;
  readEvents(sessionId: string, query: ReadEventsQuery): Promise<SessionEvent[]>;
  readEventTexts(sessionId: string, query: ReadEventsQuery): Promise<StoredEventText[]>;
  getEvents(sessionId: string, seqs: readonly number[]): Promise<SessionEvent[]>;
  readStructure(sessionId: string, fromSeq: number, limit?: number): Promise<StructuralRow[]>;
  scanEvents(sessionId: string, fromSeq: number, batchSize: number): AsyncIterable<SessionEvent[]>;
  publishSession(id: string, owner: string): Promise<void>;
  appendPending(
    sessionId: string,
    events: readonly SessionEvent[],
    opts: { readonly owner: string; readonly leaseUntil: number; readonly quota?: { readonly tenant: string; readonly maxBytes: number } },
  ): Promise<AppendPendingOutcome>;
  getTenantUsage(tenant: string): Promise<{ sessions: number; dataBytes: number }>;
  openHeadWatch(): HeadWatch;
  close(): Promise<void>;
}
