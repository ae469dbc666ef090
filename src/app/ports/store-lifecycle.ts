/** Store port, lifecycle role: start-up and close. */
import type { BlobStorePort } from '../blob-port.js';

/** Where a store reports what it found at open (the server's logger). */
export interface StoreStartLog {
  error(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  info(fields: Record<string, unknown>, message: string): void;
}

/** The lifecycle role of the store port. */
export interface StoreLifecycle {
  /**
   * Optional: called once by the composition root before the store serves. A store that starts
   * work of its own at open (the SQLite writer thread) waits for it here, closing itself and
   * throwing when it cannot serve, and reports what it found at open to `log`.
   */
  start?(log: StoreStartLog): Promise<void>;
  /** Closes the store (flushes pending group commits first). */
  close(): Promise<void>;
  /** The store's blobs (issue #39), when it keeps them: then writes take `blobs` (see blob-port.ts). */
  readonly blobs?: BlobStorePort;
}
