/**
 * A subscription that resumes by itself: after a dropped connection or a server restart
 * (UNAVAILABLE) it waits with backoff and subscribes again after the last cursor it delivered,
 * so nothing is missed or repeated. Other failures (NOT_FOUND when the session is deleted) end it.
 */
import { status, type ClientReadableStream, type ServiceError } from '@grpc/grpc-js';

/** Options of {@link resuming}. */
export interface ResumeOptions {
  /** Cursor to start after (undefined = from the start). */
  readonly after: number | undefined;
  /** false: the first UNAVAILABLE is thrown (`--no-reconnect`). */
  readonly reconnect: boolean;
  /** Told about each reconnect attempt (the CLI prints it on stderr). */
  readonly onRetry?: (cursor: number | undefined, err: ServiceError, delayMs: number) => void;
  readonly maxBackoffMs?: number;
  /** Set by the caller to stop (Ctrl-C): the current stream is cancelled and nothing resumes. */
  readonly stopped?: () => boolean;
}

/** Where a message says to resume after: its `cursor` (the per-session streams) or its `position` (the session feed). */
function resumeAt(m: { cursor?: number | undefined; position?: number | undefined }): number | undefined {
  return m.cursor ?? m.position;
}

/** The messages of `open(after, first)` and of every resumed stream, in order. */
export async function* resuming<M extends { cursor?: number | undefined } | { position: number }>(
  open: (after: number | undefined, first: boolean) => ClientReadableStream<M>,
  opts: ResumeOptions,
  onStream?: (stream: ClientReadableStream<M>) => void,
): AsyncGenerator<M> {
  let cursor = opts.after;
  let first = true;
  let backoff = 100;
  const max = opts.maxBackoffMs ?? 5000;
  for (;;) {
    const stream = open(cursor, first);
    first = false;
    onStream?.(stream);
    try {
      for await (const m of stream as AsyncIterable<M>) {
        backoff = 100;
        const at = resumeAt(m as { cursor?: number; position?: number });
        if (at !== undefined) cursor = at;
        yield m;
      }
      return;
    } catch (e) {
      const err = e as ServiceError;
      if (!opts.reconnect || err.code !== status.UNAVAILABLE || opts.stopped?.()) throw e;
      opts.onRetry?.(cursor, err, backoff);
      await new Promise((r) => setTimeout(r, backoff));
      backoff = Math.min(max, backoff * 2);
      if (opts.stopped?.()) return;
    }
  }
}
