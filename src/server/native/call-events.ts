/**
 * The event surface of a native call (on / once / off / emit, as the handlers and server-stream.ts
 * use it on grpc-js calls), in a few bytes: one flat array of (event, listener, once) entries,
 * made at the first listener. An EventEmitter costs an idle stream ~250 bytes of heap (five
 * fields and a dictionary-mode `_events` object); a call has two or three listeners.
 * As in EventEmitter: listeners run in the order added, `once` listeners are removed before they
 * run, and an 'error' emitted with no listener is thrown.
 */

type Listener = (...args: unknown[]) => void;

export class CallEvents {
  /** [event, listener, once, event, listener, once, ...]. */
  #entries: (string | Listener | boolean)[] | undefined;

  on(event: string, listener: Listener): this {
    (this.#entries ??= []).push(event, listener, false);
    return this;
  }

  addListener(event: string, listener: Listener): this {
    return this.on(event, listener);
  }

  once(event: string, listener: Listener): this {
    (this.#entries ??= []).push(event, listener, true);
    return this;
  }

  off(event: string, listener: Listener): this {
    const e = this.#entries;
    if (e === undefined) return this;
    for (let i = e.length - 3; i >= 0; i -= 3) {
      if (e[i] === event && e[i + 1] === listener) {
        e.splice(i, 3);
        break;
      }
    }
    return this;
  }

  removeListener(event: string, listener: Listener): this {
    return this.off(event, listener);
  }

  listenerCount(event: string): number {
    const e = this.#entries;
    let n = 0;
    if (e !== undefined) for (let i = 0; i < e.length; i += 3) if (e[i] === event) n++;
    return n;
  }

  emit(event: string, ...args: unknown[]): boolean {
    const e = this.#entries;
    let run: Listener[] | undefined;
    if (e !== undefined) {
      for (let i = 0; i < e.length;) {
        if (e[i] !== event) {
          i += 3;
          continue;
        }
        (run ??= []).push(e[i + 1] as Listener);
        if (e[i + 2] === true) e.splice(i, 3);
        else i += 3;
      }
    }
    if (run === undefined) {
      if (event === 'error') throw args[0] instanceof Error ? args[0] : new Error(`unhandled error event: ${String(args[0])}`);
      return false;
    }
    for (const fn of run) fn.apply(this, args);
    return true;
  }
}
