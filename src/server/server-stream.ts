/**
 * The server stream of every handler, over a transport's push sink (rpc/handler-table.ts): `ServerStream`
 * holds backpressure, cancellation and the deadline; `pipeStream` serves an async generator on
 * it (nice-grpc's handleServerStreamingCall: handlers `yield` messages). The subscription streams
 * extend `ServerStream` with a push pump of their own (subscribe-handlers.ts SubscriberStream),
 * which is how an idle subscriber holds no generator frame.
 *
 * - Backpressure: the generator is pulled only while the stream is writable; after `write()`
 *   returned false the pump waits for `drain` (grpc-js holds at most its high-water mark).
 *   Writers outside the pump (the subscription fast path, heartbeats) use the same `write`.
 * - Cancellation: a cancelled or closed call ends the stream at once, runs the end hooks
 *   (listeners, timers, buffers released) and returns the generator, so nothing leaks on a client
 *   that went away; nothing more is written.
 * - Deadline: at the call's deadline the stream ends with DEADLINE_EXCEEDED (grpc-js also cancels
 *   the call; the hooks run once either way).
 * - Errors: a throw from the generator ends the stream with its status (the status-map table).
 * - Per-stream cost: hook lists are allocated only when a hook is added, and a subclass can
 *   override `onEnded` / `onDrained` instead of adding hooks.
 */
import { DomainError } from '../domain/errors.js';
import type { RpcContext, ServerSink } from './rpc/handler-table.js';

/** setTimeout's longest delay, ms (a longer one fires at once); a deadline further away never fires. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** A server stream being written. */
export class ServerStream<Out> {
  #ended = false;
  #blocked = false;
  #drainWaiters: Array<() => void> | undefined;
  #endHooks: Array<() => void> | undefined;
  #drainHooks: Array<() => void> | undefined;
  #deadline: NodeJS.Timeout | undefined;

  /** The drain listener, made at the first refused write (an idle stream holds no closure). */
  #onDrained: (() => void) | undefined;

  constructor(private readonly ctx: RpcContext, private readonly sink: ServerSink<Out>) {
    // A call already cancelled ends on the next microtask: never from the constructor, before a
    // subclass has set its own fields (its onEnded uses them).
    if (ctx.cancelled) queueMicrotask(() => this.end());
    else ctx.onCancel(() => this.end());
    const at = ctx.deadline;
    // A deadline further away than setTimeout can wait (2^31 - 1 ms, ~24.8 days; a longer delay
    // would fire at once) is not timed here (grpc-js reports such a deadline already wrapped to a
    // 32-bit delay).
    if (Number.isFinite(at) && at - Date.now() <= MAX_TIMER_MS) {
      this.#deadline = setTimeout(() => {
        this.end(new DomainError('DEADLINE_EXCEEDED', 'the call deadline passed', {}));
      }, Math.max(0, at - Date.now()));
      this.#deadline.unref();
    }
  }

  /** True once ended (completed, failed, cancelled). */
  get ended(): boolean {
    return this.#ended;
  }

  /** True while the stream waits for `drain` (write() returned false). */
  get blocked(): boolean {
    return this.#blocked;
  }

  /** Writes one message; false when the stream wants a `drain` first (or has ended). */
  write(message: Out): boolean {
    if (this.#ended) return false;
    const ok = this.sink.write(message);
    if (!ok && !this.#blocked) {
      this.#blocked = true;
      this.sink.onDrain(this.#onDrained ??= (): void => this.drainedNow());
    }
    return ok && !this.#ended;
  }

  /** Resolves once writable again, or ended. */
  drained(): Promise<void> {
    if (!this.#blocked || this.#ended) return Promise.resolve();
    return new Promise((resolve) => (this.#drainWaiters ??= []).push(resolve));
  }

  /** Runs `fn` when the stream ends (any way). */
  onEnd(fn: () => void): void {
    if (this.#ended) fn();
    else (this.#endHooks ??= []).push(fn);
  }

  /** Runs `fn` at every `drain` after a refused write. */
  onDrain(fn: () => void): void {
    (this.#drainHooks ??= []).push(fn);
  }

  /** Called once when the stream ends (any way), before the `onEnd` hooks; for subclasses. */
  protected onEnded(): void {}

  /** Called at every `drain` after a refused write, after the `onDrain` hooks; for subclasses. */
  protected onDrained(): void {}

  /** Ends the stream: OK without `err`, else with that status (idempotent; silent when the client left). */
  end(err?: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    if (this.#deadline) clearTimeout(this.#deadline);
    this.#deadline = undefined;
    this.onEnded();
    const hooks = this.#endHooks;
    this.#endHooks = undefined;
    if (hooks) for (const hook of hooks) hook();
    this.#wakeDrainWaiters();
    if (this.ctx.cancelled) return;
    this.sink.end(err);
  }

  /** The sink drained. */
  drainedNow(): void {
    this.#blocked = false;
    this.#wakeDrainWaiters();
    if (this.#drainHooks) for (const hook of this.#drainHooks) hook();
    this.onDrained();
  }

  #wakeDrainWaiters(): void {
    const waiters = this.#drainWaiters;
    if (!waiters) return;
    this.#drainWaiters = undefined;
    for (const w of waiters) w();
  }
}

/**
 * Serves `source` on `call`: pulls a message, writes it, waits for `drain` when needed, ends OK
 * when the generator returns, with the mapped status when it throws; a cancelled call returns the
 * generator. Returns the stream (for writers outside the generator and end hooks).
 */
export function pipeStream<Out>(
  ctx: RpcContext,
  sink: ServerSink<Out>,
  source: (stream: ServerStream<Out>) => AsyncIterable<Out>,
): ServerStream<Out> {
  const stream = new ServerStream<Out>(ctx, sink);
  void (async () => {
    const it = source(stream)[Symbol.asyncIterator]();
    stream.onEnd(() => {
      // Cancelled or failed elsewhere: let the generator run its finally blocks.
      void it.return?.()?.catch(() => undefined);
    });
    try {
      for (;;) {
        if (stream.blocked) await stream.drained();
        if (stream.ended) return;
        const next = await it.next();
        if (stream.ended) return;
        if (next.done) {
          stream.end();
          return;
        }
        stream.write(next.value);
      }
    } catch (e) {
      stream.end(e);
    }
  })();
  return stream;
}
