/**
 * Output of the client commands: JSON documents / lines for machines, tables and colour for
 * people (colour only on a terminal and without NO_COLOR), a stderr progress bar (terminal only)
 * and backpressured writes for large outputs.
 */
import { once } from 'node:events';
import type { Writable } from 'node:stream';
import { toYaml } from './yaml.js';

/** A writable that may be a terminal. */
export type OutStream = Writable & { isTTY?: boolean; columns?: number };

/** ANSI styles; identity functions when colour is off. */
export interface Style {
  bold(s: string): string;
  dim(s: string): string;
  red(s: string): string;
  green(s: string): string;
  yellow(s: string): string;
  cyan(s: string): string;
  magenta(s: string): string;
}

/** Whether to colour `stream`: a terminal, and NO_COLOR unset or empty (https://no-color.org). */
export function colourEnabled(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv): boolean {
  return stream.isTTY === true && !env['NO_COLOR'];
}

/** Styles for a stream (plain text when `enabled` is false). */
export function makeStyle(enabled: boolean): Style {
  const sgr = (open: number, close: number) => (s: string) => (enabled ? `\x1b[${open}m${s}\x1b[${close}m` : s);
  return { bold: sgr(1, 22), dim: sgr(2, 22), red: sgr(31, 39), green: sgr(32, 39), yellow: sgr(33, 39), cyan: sgr(36, 39), magenta: sgr(35, 39) };
}

const ANSI = /\x1b\[[0-9;]*m/g;

function visibleLength(s: string): number {
  return s.replace(ANSI, '').length;
}

/** Left-aligned columns separated by two spaces; the last column is not padded. */
export function formatTable(header: readonly string[], rows: readonly (readonly string[])[], style: Style): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => visibleLength(r[i] ?? ''))));
  const line = (cells: readonly string[]) =>
    cells.map((c, i) => (i === cells.length - 1 ? c : c + ' '.repeat((widths[i] ?? 0) - visibleLength(c)))).join('  ').trimEnd();
  return [style.bold(line(header)), ...rows.map(line)].join('\n') + '\n';
}

/** Shortens `s` to `max` characters with an ellipsis. */
export function truncate(s: string, max: number): string {
  return s.length <= max ? s : s.slice(0, Math.max(0, max - 1)) + '…';
}

/** Formats a byte count for people. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/**
 * A progress line on stderr, redrawn at most every 100 ms, with events/s and (when the total is
 * known) an ETA; it ends with a one-line summary. A no-op unless stderr is a terminal.
 */
export class Progress {
  #done = 0;
  #events = 0;
  #last = 0;
  readonly #start = Date.now();
  readonly #enabled: boolean;

  constructor(
    private readonly stream: OutStream,
    private readonly label: string,
    private readonly total: number | undefined,
    enabled = true,
  ) {
    this.#enabled = enabled && stream.isTTY === true;
  }

  /** Adds `n` bytes done; `chunk` (JSONL bytes) also counts the events (lines) in it. */
  advance(n: number, chunk?: Uint8Array): void {
    this.#done += n;
    if (chunk) for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) this.#events++;
    if (!this.#enabled) return;
    const now = Date.now();
    if (now - this.#last < 100) return;
    this.#last = now;
    this.#draw();
  }

  /** Events counted so far. */
  get events(): number {
    return this.#events;
  }

  /** Clears the line; with `summary` (e.g. "imported"), prints `imported N events (SIZE) in T s (R events/s)`. */
  finish(summary?: string, events = this.#events): void {
    if (!this.#enabled) return;
    if (this.#last > 0) this.stream.write('\r\x1b[2K');
    if (summary !== undefined) {
      const s = Math.max(0.001, (Date.now() - this.#start) / 1000);
      this.stream.write(`${summary} ${events.toLocaleString('en-US')} events (${formatBytes(this.#done)}) in ${s.toFixed(1)} s (${Math.round(events / s).toLocaleString('en-US')} events/s)\n`);
    }
  }

  #rates(): string {
    const s = Math.max(0.001, (Date.now() - this.#start) / 1000);
    let text = `, ${this.#events.toLocaleString('en-US')} events, ${Math.round(this.#events / s).toLocaleString('en-US')} events/s`;
    if (this.total !== undefined && this.#done > 0 && this.#done < this.total) {
      text += `, ETA ${Math.ceil(((this.total - this.#done) / this.#done) * s)} s`;
    }
    return text;
  }

  #draw(): void {
    let text = `${this.label} ${formatBytes(this.#done)}`;
    if (this.total !== undefined && this.total > 0) {
      const ratio = Math.min(1, this.#done / this.total);
      const width = 30;
      const full = Math.round(ratio * width);
      text = `${this.label} [${'#'.repeat(full)}${'-'.repeat(width - full)}] ${(ratio * 100).toFixed(0).padStart(3)}% ${formatBytes(this.#done)} / ${formatBytes(this.total)}`;
    }
    this.stream.write(`\r\x1b[2K${text}${this.#rates()}`);
  }
}

/** Where a command writes: stdout for results, stderr for diagnostics. */
export class Output {
  readonly style: Style;
  readonly errStyle: Style;

  /**
   * @param json - machine-readable output (`--json`, `-o json` or `-o yaml`)
   * @param yaml - `-o yaml`: every JSON document and line is written as YAML instead
   */
  constructor(
    readonly json: boolean,
    readonly stdout: OutStream,
    readonly stderr: OutStream,
    env: NodeJS.ProcessEnv,
    readonly yaml = false,
  ) {
    this.style = makeStyle(!json && colourEnabled(stdout, env));
    this.errStyle = makeStyle(!json && colourEnabled(stderr, env));
  }

  /** Writes text, waiting for `drain` when the stream's buffer is full. */
  async write(text: string | Uint8Array, to: Writable = this.stdout): Promise<void> {
    // A pager the user quit is a destroyed stream: the rest is dropped, never waited on.
    if (to.destroyed) return;
    if (!to.write(text)) await Promise.race([once(to, 'drain'), once(to, 'close')]);
  }

  /** Writes one JSON document (pretty on a terminal, compact otherwise) or one compact JSON line. */
  async printJson(value: unknown, line = false): Promise<void> {
    if (this.yaml) return this.write(`${line ? '---\n' : ''}${toYaml(value)}`);
    const pretty = !line && this.stdout.isTTY === true;
    await this.write(JSON.stringify(value, null, pretty ? 2 : undefined) + '\n');
  }

  /** One machine-readable line given as JSON text: as is, or as a YAML document with `-o yaml`. */
  jsonLine(text: string): string {
    return this.yaml ? `---\n${toYaml(JSON.parse(text))}`.trimEnd() : text;
  }

  /** Width for human lines: the terminal's, else 120. */
  get width(): number {
    return this.stdout.columns || 120;
  }

  /** A progress bar on stderr (drawn only on a terminal, never in JSON mode). */
  progress(label: string, total?: number): Progress {
    return new Progress(this.stderr, label, total, !this.json);
  }
}
