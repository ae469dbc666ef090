/**
 * The persisted positions of the live GenAI export (src/app/otel-genai-live.ts): a small journal
 * file, one JSON line per acknowledged export `{"s":sessionId,"n":nextSeq}`, appended and
 * fsynced before the exporter moves on. The first line is a header, so an existing file (even one
 * with no session yet) means "a baseline was taken". Reading keeps the last line per session and
 * ignores a torn last line (a crash in the middle of an append: that export is simply done again).
 * `replace` rewrites the whole file under a temporary name, fsyncs it and renames it over the old
 * one (the start-up compaction), so the journal stays as small as the number of sessions.
 *
 * A file rather than a table in the session database: the export works the same over SQLite and
 * PostgreSQL, writes nothing into the log's own database, and deleting the file is how an operator
 * asks for a fresh baseline.
 */
import { open, readFile, rename, rm, type FileHandle } from 'node:fs/promises';
import type { ExportPositions } from '../app/otel-genai-live.js';

const HEADER = JSON.stringify({ palimpsest: 'otel-genai-positions', version: 1 });

/** Positions journal at `path`. */
export class FileExportPositions implements ExportPositions {
  #fh: FileHandle | undefined;

  constructor(readonly path: string) {}

  async load(): Promise<Map<string, number> | undefined> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw e;
    }
    const lines = text.split('\n');
    if (lines[0] !== HEADER) throw new Error(`${this.path} is not a Palimpsest otel-genai positions file (first line ${JSON.stringify(lines[0]?.slice(0, 80))})`);
    const out = new Map<string, number>();
    for (const line of lines.slice(1)) {
      if (line === '') continue;
      let rec: unknown;
      try {
        rec = JSON.parse(line);
      } catch {
        continue; // a torn last line
      }
      const r = rec as { s?: unknown; n?: unknown };
      if (typeof r.s === 'string' && typeof r.n === 'number' && Number.isSafeInteger(r.n)) out.set(r.s, r.n);
    }
    return out;
  }

  async replace(positions: ReadonlyMap<string, number>): Promise<void> {
    await this.#fh?.close();
    this.#fh = undefined;
    const tmp = `${this.path}.tmp-${process.pid}`;
    const fh = await open(tmp, 'w');
    try {
      let body = `${HEADER}\n`;
      for (const [s, n] of positions) body += `${JSON.stringify({ s, n })}\n`;
      await fh.writeFile(body);
      await fh.sync();
    } catch (e) {
      await fh.close();
      await rm(tmp, { force: true });
      throw e;
    }
    await fh.close();
    await rename(tmp, this.path);
    this.#fh = await open(this.path, 'a');
  }

  async save(sessionId: string, nextSeq: number): Promise<void> {
    this.#fh ??= await open(this.path, 'a');
    await this.#fh.appendFile(`${JSON.stringify({ s: sessionId, n: nextSeq })}\n`);
    await this.#fh.sync();
  }

  async close(): Promise<void> {
    await this.#fh?.close();
    this.#fh = undefined;
  }
}

/** Positions kept in memory only (the `:memory:` store, whose log does not survive either). */
export class MemoryExportPositions implements ExportPositions {
  #saved: Map<string, number> | undefined;
  async load(): Promise<Map<string, number> | undefined> { return this.#saved === undefined ? undefined : new Map(this.#saved); }
  async replace(positions: ReadonlyMap<string, number>): Promise<void> { this.#saved = new Map(positions); }
  async save(sessionId: string, nextSeq: number): Promise<void> { (this.#saved ??= new Map()).set(sessionId, nextSeq); }
  async close(): Promise<void> {}
}
