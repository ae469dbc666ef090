/**
 * The messages between the SQLite store and its writer thread (append-thread.ts and
 * append-thread-worker.ts). Everything here crosses a structured clone: plain data only.
 */
import type { AppendOutcome } from '../../app/store-port.js';
import type { QueuedAppend, WriteCounters } from './group-commit.js';

/** What the writer thread needs to open its connection. */
export interface WriterConfig {
  readonly path: string;
  readonly durability: 'full' | 'normal';
  readonly busyTimeoutMs: number;
  readonly groupCommit: 'immediate' | 'microtask' | undefined;
}

/** A queued append without its promise callbacks, numbered for the answer. */
export type WireCall = Omit<QueuedAppend, 'resolve' | 'reject'> & { readonly id: number };

/** An error as it crosses the thread boundary (SQLite's code is what the store classifies). */
export interface WireError {
  readonly name: string;
  readonly message: string;
  readonly code: string | undefined;
}

/** The store to the writer. */
export type ToWriter =
  | { readonly kind: 'append'; readonly calls: readonly WireCall[] }
  | { readonly kind: 'close' };

/** One call's answer: its id, then its outcome or its error. */
export type WireResult = readonly [id: number, outcome: AppendOutcome | null, error: WireError | null];

/** The writer to the store. */
export type FromWriter =
  | {
      readonly kind: 'done';
      readonly results: readonly WireResult[];
      /** Heads the committed groups moved (id, created_at, next seq), for the head record. */
      readonly heads: readonly (readonly [string, number, number])[];
      /** The writer's counters so far. */
      readonly counters: WriteCounters;
    }
  | { readonly kind: 'open-failed'; readonly error: WireError }
  | { readonly kind: 'closed' };

export function toWireError(e: unknown): WireError {
  if (e instanceof Error) {
    const code = (e as { code?: unknown }).code;
    return { name: e.name, message: e.message, code: typeof code === 'string' ? code : undefined };
  }
  return { name: 'Error', message: String(e), code: undefined };
}

/** The error again, with its name and code (the store's boundary classifies it by code). */
export function fromWireError(w: WireError): Error {
  const e = new Error(w.message) as Error & { code?: string };
  e.name = w.name;
  if (w.code !== undefined) e.code = w.code;
  return e;
}
