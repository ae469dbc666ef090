/**
 * Live GenAI export (issue #41, `serve --otel-genai-export`): each turn this process commits is
 * exported as one trace (see otel-genai.ts) once its `turn/end` is committed, at least once:
 *
 *  - Position: per session, the first seq not yet covered by an exported trace, kept by an
 *    {@link ExportPositions} (a journal file next to the database, see
 *    src/store/otel-genai-positions.ts). It moves only after the sink acknowledged the spans, so
 *    a crash between export and save exports the turn again; the span ids are derived from the
 *    session id and seqs, so the repeat carries the very same trace and span ids (a backend
 *    sees a duplicate of the same span, never a second turn).
 *  - Trigger: batches this process commits (the change feed's publish, {@link TappedChangeFeed})
 *    that hold a `turn/end`, `compaction/end` or `compaction/prune`.
 *  - Start: every session whose head is past its position is examined, so turns committed before
 *    a crash but not exported (or committed by another process on a shared PostgreSQL store, or
 *    imported) are exported then. On the very first start (no positions yet) the existing
 *    sessions are taken as already exported up to their head (an open turn from its `turn/start`):
 *    turning the export on does not replay history.
 *  - Failure: an export the sink refuses is retried with a growing delay (up to 30 s); the
 *    position does not move meanwhile.
 */
import type { ChangeFeed, CommittedBatch, SessionListener } from './change-feed.js';
import type { SessionEvent } from '../domain/event.js';
import type { SessionStore } from './store-port.js';
import { sessionToGenAiTraces } from './otel-genai.js';
import { type GenAiSpan } from './otel-genai-conventions.js';

/** Where exported spans go (an OTLP exporter). Rejects when they were not accepted. */
export interface SpanSink {
  export(spans: readonly GenAiSpan[]): Promise<void>;
  shutdown(): Promise<void>;
}

/** The persisted export positions (per session: the first seq not yet covered). */
export interface ExportPositions {
  /** The saved positions, or undefined when none were ever saved (first start). */
  load(): Promise<Map<string, number> | undefined>;
  /** Saves all positions at once (the baseline of a first start, or a compaction); durable on return. */
  replace(positions: ReadonlyMap<string, number>): Promise<void>;
  /** Saves one session's position; durable on return. */
  save(sessionId: string, nextSeq: number): Promise<void>;
  close(): Promise<void>;
}

/** The logger the exporter reports to. */
export interface LiveExportLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** Options of {@link LiveGenAiExporter}. */
export interface LiveExportOptions {
  /** Record message content (opt-in attributes). */
  readonly content?: boolean;
  /** First retry delay after a refused export, ms (doubles up to 30 s). Default 500. */
  readonly retryMs?: number;
  readonly logger?: LiveExportLogger;
}

/** Event types whose commit may complete a trace. */
const TRIGGERS: ReadonlySet<string> = new Set(['turn/end', 'compaction/end', 'compaction/prune']);

type Store = Pick<SessionStore, 'listSessions' | 'scanEvents' | 'readEvents'>;

/** The live exporter (one per process). */
export class LiveGenAiExporter {
  readonly #positions = new Map<string, number>();
  readonly #pending = new Set<string>();
  #started = false;
  #running: Promise<void> | undefined;
  #closed = false;
  #retryTimer: ReturnType<typeof setTimeout> | undefined;
  #retryMs: number;
  /** Traces exported (acknowledged) since start: tests and logs. */
  exportedTraces = 0;

  constructor(
    private readonly store: Store,
    private readonly sink: SpanSink,
    private readonly positions: ExportPositions,
    private readonly options: LiveExportOptions = {},
  ) {
    this.#retryMs = options.retryMs ?? 500;
  }

  /** Loads the positions (a first start takes the baseline) and schedules what is behind. */
  async start(): Promise<void> {
    const saved = await this.positions.load();
    const heads = new Map<string, number>();
    let token = '';
    do {
      const page = await this.store.listSessions({ pageSize: 500, pageToken: token });
      for (const s of page.sessions) heads.set(s.header.id, s.nextSeq);
      token = page.nextPageToken;
    } while (token !== '');
    if (saved === undefined) {
      for (const [id, head] of heads) this.#positions.set(id, await this.#baseline(id, head));
    } else {
      // Sessions deleted since are forgotten; new ones start at 0.
      for (const [id, head] of heads) {
        const pos = saved.get(id) ?? 0;
        this.#positions.set(id, pos);
        if (head > pos) this.#pending.add(id);
      }
    }
    await this.positions.replace(this.#positions);
    this.options.logger?.info({ sessions: heads.size, behind: this.#pending.size, firstStart: saved === undefined }, 'otel-genai export started');
    this.#started = true;
    this.#kick();
  }

  /** A first start's position of a session: its head, or the `turn/start` of a turn still open. */
  async #baseline(id: string, head: number): Promise<number> {
    const [last] = await this.store.readEvents(id, { fromSeq: head, direction: 'backward', limit: 1, types: ['turn/start', 'turn/end'] });
    return last?.type === 'turn/start' ? last.seq : head;
  }

  /** A batch this process committed (the change feed tap). */
  onCommit(batch: CommittedBatch): void {
    if (this.#closed || !batch.events.some((e) => TRIGGERS.has(e.type))) return;
    this.#pending.add(batch.sessionId);
    this.#kick();
  }

  /** Resolves when nothing is pending or running (tests). */
  async idle(): Promise<void> {
    while (this.#running !== undefined) await this.#running;
  }

  /** Number of sessions waiting for an export (tests, logs). */
  get pendingSessions(): number {
    return this.#pending.size;
  }

  #kick(): void {
    // Before start() has loaded the positions, a commit is only remembered (a replica waiting for
    // its database starts the export late; exporting then would start from seq 0).
    if (!this.#started || this.#running !== undefined || this.#closed || this.#retryTimer !== undefined) return;
    this.#running = this.#drain().finally(() => { this.#running = undefined; });
  }

  async #drain(): Promise<void> {
    while (!this.#closed && this.#pending.size > 0) {
      const id = this.#pending.values().next().value as string;
      this.#pending.delete(id);
      try {
        await this.#exportSession(id);
        this.#retryMs = this.options.retryMs ?? 500;
      } catch (e) {
        this.#pending.add(id);
        this.options.logger?.warn({ err: e, sessionId: id, retryMs: this.#retryMs }, 'otel-genai export failed; will retry');
        const delay = this.#retryMs;
        this.#retryMs = Math.min(30_000, this.#retryMs * 2);
        this.#retryTimer = setTimeout(() => {
          this.#retryTimer = undefined;
          this.#kick();
        }, delay);
        this.#retryTimer.unref?.();
        return;
      }
    }
  }

  async #exportSession(id: string): Promise<void> {
    const from = this.#positions.get(id) ?? 0;
    const events: SessionEvent[] = [];
    for await (const batch of this.store.scanEvents(id, from, 1000)) events.push(...batch);
    if (events.length === 0) return;
    const traces = sessionToGenAiTraces(id, events, { content: this.options.content === true })
      .filter((t) => t.complete && (t.kind === 'turn' || t.kind === 'compaction'));
    if (traces.length === 0) return;
    await this.sink.export(traces.flatMap((t) => t.spans));
    const next = traces.reduce((m, t) => Math.max(m, t.lastSeq), -1) + 1;
    await this.positions.save(id, next);
    this.#positions.set(id, next);
    this.exportedTraces += traces.length;
  }

  /** Stops: waits for the export in flight, then shuts the sink and the positions down. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#retryTimer !== undefined) clearTimeout(this.#retryTimer);
    await this.#running;
    await this.sink.shutdown();
    await this.positions.close();
  }
}

/**
 * A change feed that also hands every batch this process publishes to `tap` (after its own
 * listeners): the live exporter and the compaction metrics follow every session without
 * subscribing to each.
 */
export class TappedChangeFeed implements ChangeFeed {
  constructor(private readonly inner: ChangeFeed, private readonly tap: (batch: CommittedBatch) => void) {}

  subscribe(sessionId: string, listener: SessionListener): () => void { return this.inner.subscribe(sessionId, listener); }
  listen(sessionId: string, listener: SessionListener): void { this.inner.listen(sessionId, listener); }
  unlisten(sessionId: string, listener: SessionListener): void { this.inner.unlisten(sessionId, listener); }
  publish(batch: CommittedBatch): void {
    this.inner.publish(batch);
    try {
      this.tap(batch);
    } catch (e) {
      this.inner.onListenerError(e);
    }
  }
  deleted(sessionId: string): void { this.inner.deleted(sessionId); }
  listenerCount(sessionId?: string): number { return this.inner.listenerCount(sessionId); }
  get onCommitted(): () => void { return this.inner.onCommitted; }
  set onCommitted(fn: () => void) { this.inner.onCommitted = fn; }
  get onListenerError(): (err: unknown) => void { return this.inner.onListenerError; }
  set onListenerError(fn: (err: unknown) => void) { this.inner.onListenerError = fn; }
  get onUnwatched(): (sessionId: string) => void { return this.inner.onUnwatched; }
  set onUnwatched(fn: (sessionId: string) => void) { this.inner.onUnwatched = fn; }
  close(): Promise<void> { return this.inner.close(); }
}
