/**
 * The store port (v2): everything the app layer needs from durable storage, by role (src/app/ports/:
 * session records, event log, pending imports, tenant usage, feed log, head watch, lifecycle, and
 * the optional capabilities the app probes for). SQLite (embedded
 * default) and memory implement it; a shared PostgreSQL store with several server replicas
 * implements the same port, so nothing here assumes a single writer or a single process:
 *
 *  - `append` is a compare-and-set on what is stored: the head the engine validated against
 *    (`expectedNextSeq`) AND the `writer` token the plan's base state had. Every committed write
 *    leaves a fresh token on the session row, so a batch planned on top of a batch that never
 *    committed (a pipelined batch behind a failed one) cannot commit even when another writer
 *    happened to leave the head where it expects it. No memory of the caller, no reliance on call
 *    order: two store instances over one database behave exactly as one.
 *  - Quotas are checked against per-tenant counters inside the transaction of the write they
 *    guard (create, append, import chunk), so concurrency cannot exceed them.
 *  - A pending (importing) session is owned by the process that created it, for a lease it renews
 *    with every chunk; opening a store removes only pending sessions whose lease has passed.
 *  - Idempotency keys are stored in the same transaction as the events they acknowledge, with the
 *    surface length the original response carried, so a replay on any process answers exactly the
 *    original response.
 *  - `openHeadWatch` tells a process that the head of a session may have moved because of a
 *    commit made by any process (a hint: readers then read the store by seq).
 *
 * All methods are async so that network stores fit; the SQLite store answers synchronously inside.
 */
import type { EncodedEventPages, StructureColumnReads, SurfaceStructureReads, TokenFigureReads } from './ports/capabilities.js';
import type { EventLog } from './ports/event-log.js';
import type { FeedLog } from './ports/feed-log.js';
import type { HeadWatchSource } from './ports/head-watch.js';
import type { PendingImports } from './ports/pending-imports.js';
import type { SessionRecords } from './ports/session-records.js';
import type { StoreLifecycle } from './ports/store-lifecycle.js';
import type { TenantUsageReads } from './ports/tenant-usage.js';

export * from './ports/capabilities.js';
export * from './ports/event-log.js';
export * from './ports/feed-log.js';
export * from './ports/head-watch.js';
export * from './ports/pending-imports.js';
export * from './ports/session-records.js';
export * from './ports/store-lifecycle.js';
export * from './ports/tenant-usage.js';

/** The store port: every role, and the optional capabilities (probe them with their type guards). */
export type SessionStore = SessionRecords & EventLog & PendingImports & TenantUsageReads & FeedLog & HeadWatchSource & StoreLifecycle
  & Partial<EncodedEventPages> & Partial<SurfaceStructureReads> & Partial<TokenFigureReads> & Partial<StructureColumnReads>;
