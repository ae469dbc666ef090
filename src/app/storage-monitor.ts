/**
 * Logs storage failures once per episode rather than once per request: while the disk is full
 * every write fails, and a log line per request would fill what little space is left (and bury
 * the cause). An episode starts with the first StorageError of any store call and ends with the
 * next successful write, which logs the recovery and how many calls failed meanwhile. Reads that
 * succeed during an episode do not end it (they keep being served while writes fail).
 *
 * Store-independent: a Proxy over any store object; only the names of the write methods are
 * known here.
 */
import { DataCorruptedError, StorageError } from './storage-error.js';

/** Logger port (pino in production). */
export interface StorageLogger {
  error(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** Store methods whose success ends a failure episode. */
const WRITE_METHODS: ReadonlySet<string> = new Set(['createSession', 'append', 'appendPending', 'publishSession', 'deleteSession', 'deletePending', 'updateLabels']);

/** Episode state, exposed for tests and metrics. */
export interface StorageEpisodes {
  /** The kind of the failure in progress, or undefined when storage is healthy. */
  readonly current: StorageError['kind'] | undefined;
  /** Failed calls in the current episode. */
  readonly failures: number;
  /** Episodes started so far. */
  readonly episodes: number;
}

/** `store`, with its StorageErrors logged once per episode. */
export function monitorStorage<T extends object>(store: T, log: StorageLogger): T & { readonly storageEpisodes: StorageEpisodes } {
  const state = { current: undefined as StorageError['kind'] | undefined, failures: 0, episodes: 0, since: 0 };
  const failed = (method: string, e: unknown): void => {
    if (e instanceof DataCorruptedError) {
      // Never quiet: every refused read is an operator's problem (restore from a backup).
      log.error({ dataLoss: true, sessionId: e.sessionId, seq: e.seq, method, err: e.message }, 'DATA LOSS: stored data failed its integrity check; not served (DATA_LOSS/DATA_CORRUPTED)');
      return;
    }
    if (!(e instanceof StorageError)) return;
    if (state.current === e.kind) {
      state.failures++;
      return;
    }
    // A first failure, or another kind of failure (the disk filled up after an I/O error): a new episode.
    state.current = e.kind;
    state.failures = 1;
    state.episodes++;
    state.since = Date.now();
    log.error({ kind: e.kind, code: e.code, method, err: e.message },
      e.kind === 'full'
        ? 'storage is full: writes fail with RESOURCE_EXHAUSTED/STORAGE_FULL until space is freed; reads are still served (logged once until a write succeeds)'
        : 'storage I/O failure: calls fail with UNAVAILABLE/STORAGE_UNAVAILABLE (logged once until a write succeeds)');
  };
  const succeeded = (method: string): void => {
    if (state.current === undefined || !WRITE_METHODS.has(method)) return;
    log.warn({ kind: state.current, failedCalls: state.failures, ms: Date.now() - state.since, method }, 'storage recovered: writes succeed again');
    state.current = undefined;
    state.failures = 0;
  };
  // One wrapper per method, rebuilt when the property changes (tests replace store methods).
  const wrapped = new Map<PropertyKey, { readonly original: unknown; readonly fn: unknown }>();
  const episodes: StorageEpisodes = {
    get current() { return state.current; },
    get failures() { return state.failures; },
    get episodes() { return state.episodes; },
  };
  return new Proxy(store, {
    get(target, prop) {
      if (prop === 'storageEpisodes') return episodes;
      const v: unknown = Reflect.get(target, prop, target);
      if (typeof v !== 'function') return v;
      const hit = wrapped.get(prop);
      if (hit !== undefined && hit.original === v) return hit.fn;
      const name = String(prop);
      const fn = (...args: unknown[]): unknown => {
        let r: unknown;
        try {
          r = (v as (...a: unknown[]) => unknown).apply(target, args);
        } catch (e) {
          failed(name, e);
          throw e;
        }
        if (r instanceof Promise) {
          return r.then((x: unknown) => {
            succeeded(name);
            return x;
          }, (e: unknown) => {
            failed(name, e);
            throw e;
          });
        }
        return r;
      };
      wrapped.set(prop, { original: v, fn });
      return fn;
    },
  }) as T & { readonly storageEpisodes: StorageEpisodes };
}
