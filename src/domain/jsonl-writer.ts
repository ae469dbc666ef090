/**
 * Writer of the reference JSONL session format (dsh-semantics 5.2), with the reference's chunk
 * packing: a run of at least {@link MIN_PACKED_RUN} consecutive same-block delta chunks becomes one
 * packed row. Exporting an imported reference file reproduces it line for line.
 */
import type { SessionEvent, SessionHeader } from './event.js';
import { classifyPackable, MIN_PACKED_RUN, packRun, sameBlock, type PackableChunk } from './jsonl-chunk-rows.js';
import { encodeHeaderLine } from './jsonl-header.js';

/** Options of a {@link JsonlEncoder}. */
export interface JsonlEncoderOptions {
  /** Pack delta-chunk runs (the reference default). Default true. */
  readonly packChunks?: boolean;
}

/**
 * One event as a line: `type, seq, time, data`, then `sourceEventSeqs`, `surfaceOp` and
 * `ignorable` when present (the reference's key order; absent fields are omitted, never null).
 */
export function encodeEventLine(event: SessionEvent): string {
  const out: Record<string, unknown> = { type: event.type, seq: event.seq, time: event.time, data: event.data };
  if (event.sourceEventSeqs !== undefined) out['sourceEventSeqs'] = event.sourceEventSeqs;
  if (event.surfaceOp !== undefined) out['surfaceOp'] = event.surfaceOp;
  if (event.ignorable !== undefined) out['ignorable'] = event.ignorable;
  return JSON.stringify(out);
}

/**
 * Turns a header and an ascending event stream into JSONL lines (without terminators). Events
 * that may belong to a packed run are held back until the run ends, so memory is bounded by the
 * longest run.
 *
 * @example
 * const enc = new JsonlEncoder(header);
 * out.write(enc.headerLine() + '\n');
 * for (const e of events) for (const l of enc.push(e)) out.write(l + '\n');
 * for (const l of enc.end()) out.write(l + '\n');
 */
export class JsonlEncoder {
  readonly #header: SessionHeader;
  readonly #pack: boolean;
  #run: { first: PackableChunk; events: SessionEvent[]; members: string[]; dt: number[] } | undefined;

  constructor(header: SessionHeader, options: JsonlEncoderOptions = {}) {
    this.#header = header;
    this.#pack = options.packChunks ?? true;
  }

  /** The header line. */
  headerLine(): string {
    return encodeHeaderLine(this.#header);
  }

  /** Feeds the next event; returns the lines that are now final (possibly none). */
  push(event: SessionEvent): string[] {
    const chunk = this.#pack ? classifyPackable(event) : undefined;
    const run = this.#run;
    if (chunk !== undefined && run !== undefined) {
      const last = run.events[run.events.length - 1] as SessionEvent;
      const dt = event.time - last.time;
      if (sameBlock(run.first, chunk) && event.seq === last.seq + 1 && Number.isSafeInteger(dt)) {
        run.events.push(event);
        run.members.push(chunk.member);
        run.dt.push(dt);
        return [];
      }
    }
    const lines = this.#flush();
    if (chunk !== undefined) {
      this.#run = { first: chunk, events: [event], members: [chunk.member], dt: [] };
    } else {
      lines.push(encodeEventLine(event));
    }
    return lines;
  }

  /** Ends the stream; returns the lines still held back. */
  end(): string[] {
    return this.#flush();
  }

  #flush(): string[] {
    const run = this.#run;
    this.#run = undefined;
    if (run === undefined) return [];
    if (run.events.length < MIN_PACKED_RUN) return run.events.map(encodeEventLine);
    const first = run.events[0] as SessionEvent;
    return [JSON.stringify(packRun(run.first, first.seq, first.time, run.dt, run.members))];
  }
}

/**
 * Encodes a whole session as JSONL text, header first, each line terminated by `\n` (small
 * sessions, tests; large exports should stream with {@link JsonlEncoder}).
 */
export function encodeJsonl(header: SessionHeader, events: Iterable<SessionEvent>, options: JsonlEncoderOptions = {}): string {
  const encoder = new JsonlEncoder(header, options);
  const lines = [encoder.headerLine()];
  for (const event of events) lines.push(...encoder.push(event));
  lines.push(...encoder.end());
  return lines.map((line) => line + '\n').join('');
}
