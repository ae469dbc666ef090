/**
 * Retention: deletes sessions untouched for longer than their retention period, in small
 * background batches that never block appends.
 *
 * A session's period is its `palimpsest.dev/ttl-days` label when it has one (a positive
 * integer), else the server's `--retention-days` (0 = keep forever). "Untouched" is the later of
 * its created_at and its last event's time, as `palimpsest sessions --older-than` lists them.
 *
 * A sweep pages through the store's sessions (the store port's listSessions, every tenant) and
 * deletes each expired session through the app's delete path (SessionService.deleteSession:
 * the cache drops it and its subscribers are told) as a conditional delete: the store deletes it
 * only while its head and creation time are still those of the listing, checked in the delete's
 * own transaction, so a session appended to (or deleted and re-created) at any moment after it
 * was listed is kept and no acknowledged append is lost. Each delete is its own short store
 * transaction; the sweeper yields to the event loop (setImmediate) after every batch of
 * `batchSize` sessions examined, so appends interleave with it. Works on every store.
 */
import type { SessionService } from './session-service.js';
import { DataCorruptedError } from './storage-error.js';

/** The label that gives one session its own retention period, in whole days. */
export const TTL_LABEL = 'palimpsest.dev/ttl-days';

const DAY_MS = 86_400_000;

/** Retention settings. */
export interface RetentionOptions {
  /** Days after which an untouched session without a TTL label is deleted (0 = never). */
  readonly retentionDays: number;
  /** Sessions examined per batch (default 100). */
  readonly batchSize?: number;
  /** Time between sweeps, ms (default one hour). */
  readonly intervalMs?: number;
  readonly now?: () => number;
  /** Called after each delete (metrics). */
  readonly onDeleted?: (count: number) => void;
  readonly log?: { info(obj: object, msg: string): void; error(obj: object, msg: string): void };
}

/** What one sweep did. */
export interface SweepReport {
  readonly examined: number;
  readonly deleted: number;
  readonly batches: number;
}

/** The retention period of a session with these labels, ms, or undefined for none. */
export function retentionMs(labels: Readonly<Record<string, string>>, retentionDays: number): number | undefined {
  const ttl = labels[TTL_LABEL];
  if (ttl !== undefined && /^[1-9]\d{0,5}$/.test(ttl)) return Number(ttl) * DAY_MS;
  return retentionDays > 0 ? retentionDays * DAY_MS : undefined;
}

const yieldTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** The background sweeper of one service. */
export class Retention {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<SweepReport> | undefined;
  private stopped = false;

  constructor(private readonly app: SessionService, private readonly opts: RetentionOptions) {}

  /** Starts sweeping: the first sweep soon after start (at most 10 s), then every intervalMs. */
  start(): void {
    const interval = this.opts.intervalMs ?? 3_600_000;
    const tick = (): void => {
      if (this.stopped) return;
      void this.sweep().catch((e: unknown) => this.opts.log?.error({ err: e }, 'retention sweep failed; retrying at the next interval'))
        .finally(() => {
          if (!this.stopped) this.timer = setTimeout(tick, interval).unref();
        });
    };
    this.timer = setTimeout(tick, Math.min(interval, 10_000)).unref();
  }

  /** Stops sweeping; resolves once a sweep in progress ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    await this.running?.catch(() => undefined);
  }

  /** One sweep over every session (one at a time). */
  sweep(): Promise<SweepReport> {
    this.running ??= this.sweepOnce().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async sweepOnce(): Promise<SweepReport> {
    const store = this.app.store;
    const now = (this.opts.now ?? Date.now)();
    const batchSize = this.opts.batchSize ?? 100;
    let examined = 0;
    let deleted = 0;
    let batches = 0;
    let pageToken: string | undefined;
    do {
      if (this.stopped) break;
      const page = await store.listSessions({ pageSize: batchSize, pageToken });
      batches++;
      for (const rec of page.sessions) {
        examined++;
        const keep = retentionMs(rec.labels, this.opts.retentionDays);
        if (keep === undefined || rec.header.createdAt >= now - keep) continue;
        let last = rec.header.createdAt;
        if (rec.eventCount > 0) {
          let tail: { time: number } | undefined;
          try {
            [tail] = await store.readEvents(rec.header.id, { fromSeq: Number.MAX_SAFE_INTEGER, direction: 'backward', limit: 1 });
          } catch (e) {
            // A damaged session (its rows fail their checksums) is the operator's to restore or
            // delete (palimpsest verify); the sweep goes on with the others.
            if (!(e instanceof DataCorruptedError)) throw e;
            this.opts.log?.error({ session: rec.header.id, err: e.message }, 'retention: skipped a damaged session');
            continue;
          }
          if (tail !== undefined) last = Math.max(last, tail.time);
        }
        if (last >= now - keep) continue;
        // Conditional on the listed head and creation time: an append (or a delete and re-create)
        // that lands after the listing, even during the delete call, keeps the session.
        const prefix = rec.tenant === '' ? '' : `${rec.tenant}/`;
        try {
          if (!(await this.app.deleteSession({ tenant: rec.tenant }, rec.header.id.slice(prefix.length), { nextSeq: rec.nextSeq, createdAt: rec.header.createdAt }))) continue;
          deleted++;
          this.opts.onDeleted?.(1);
        } catch (e) {
          // Deleted meanwhile (NOT_FOUND) or a store failure: the next sweep sees it again.
          if ((e as { reason?: string }).reason !== 'SESSION_NOT_FOUND') throw e;
        }
      }
      pageToken = page.nextPageToken || undefined;
      // Appends run between batches.
      await yieldTurn();
    } while (pageToken !== undefined);
    if (deleted > 0) {
      this.opts.log?.info({ examined, deleted, batches, retentionDays: this.opts.retentionDays }, `retention: deleted ${deleted} session(s) untouched past their retention period`);
    }
    return { examined, deleted, batches };
  }
}
