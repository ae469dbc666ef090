/**
 * The event model of a Palimpsest session, as the reference (DeepSeek Harness) writes it.
 * See docs/dsh-semantics.md section 1.
 */

/** A lossless JSON value: null, booleans, finite numbers other than -0, strings, dense arrays, plain objects. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A JSON object. */
export type JsonObject = { [key: string]: Json };

/** A replace surface op: shadow the surface range [start, end] (inclusive, by position) with the new event. */
export interface ReplaceOp {
  readonly op: 'replace';
  readonly start: number;
  readonly end: number;
}

/** How an event entered the surface. */
export type SurfaceOp = 'append' | ReplaceOp;

/**
 * One committed log entry in the reference's envelope. Absent optional keys are *absent*
 * (never `undefined`-valued own properties): presence is significant for `sourceEventSeqs`.
 */
export interface SessionEvent {
  readonly type: string;
  readonly seq: number;
  readonly time: number;
  readonly data: Json;
  readonly sourceEventSeqs?: readonly number[];
  readonly surfaceOp?: SurfaceOp;
  readonly ignorable?: true;
}

/**
 * An event as a client proposed it, before validation. Fields are `unknown` on purpose: the
 * validator must detect and report every malformed shape with its rule ID. `seq` and `time`
 * may be omitted on live append (the engine assigns the next seq and the clock's time).
 */
export interface CandidateEvent {
  readonly type: unknown;
  readonly data: unknown;
  readonly seq?: unknown;
  readonly time?: unknown;
  readonly sourceEventSeqs?: unknown;
  readonly surfaceOp?: unknown;
  readonly ignorable?: unknown;
  readonly [extra: string]: unknown;
}

/** The session format version this build reads and writes (reference SESSION_FORMAT_VERSION). */
export const SESSION_FORMAT_VERSION = 0;

/** The session header kept outside the event log (dsh-semantics 1.6). */
export interface SessionHeader {
  readonly version: number;
  readonly id: string;
  readonly createdAt: number;
  readonly cwd?: string;
  readonly parentSession?: string;
  readonly seedLength?: number;
  readonly origin?: 'subagent';
  readonly delegationDepth?: number;
  readonly agentPreset?: string;
}

/** The three surface-eligible event types of the newest reference code (dsh-semantics 1.5). */
export const SURFACE_TYPES: ReadonlySet<string> = new Set(['user/message', 'assistant/message', 'tool/result']);

/**
 * The surface types plus `steering/message`, the retired surface type that imported logs may hold
 * (seen as the user/message the reference's load path upgrades it to; live appends refuse it):
 * every type whose events can be on a surface and carry a message.
 */
export const MESSAGE_EVENT_TYPES: ReadonlySet<string> = new Set([...SURFACE_TYPES, 'steering/message']);

/** The structural columns of one event: all a cold open needs to rebuild the surface. */
export interface StructuralRow {
  readonly seq: number;
  readonly type: string;
  readonly surfaceOp?: SurfaceOp;
  readonly sourceEventSeqs?: readonly number[];
  readonly ignorable?: true;
}
