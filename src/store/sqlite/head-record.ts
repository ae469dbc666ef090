/**
 * The session heads, recorded a second time outside the database: `<db>-heads`, an append-only
 * file of checksummed lines `<crc32c> <json>\n`, json = `[id, createdAt, nextSeq]` after a commit
 * moved a head, `[id, createdAt, null]` after a delete.
 *
 * Why outside the database: a damaged WAL frame makes SQLite stop its WAL recovery there and
 * silently drop that commit and every later one (sessions row, events, digest: everything in the
 * database reverts together, consistently), so nothing inside the file can tell that commits were
 * lost, and the next appends would reuse their seqs. This file survives that: a line is written
 * (write(2), O_APPEND) once a commit is durable (after the WAL sync that covers it, or COMMIT
 * itself under fullSync 'inline') and before the commit is acknowledged, so a recorded head is
 * never ahead of what a power loss keeps (no false alarm after a crash). The file is not fsynced
 * per commit (that would double the syncs per commit): a process crash keeps every line at
 * once, a power loss the lines the kernel wrote back (about 30 s); it is fsynced at close. Not
 * kept under durability 'normal', which may lose acknowledged commits on power loss by design.
 * At open the store compares every
 * recorded head with the database: a session whose stored head is below its recorded head, or
 * that is missing (or of another incarnation) while recorded as live, lost acknowledged commits.
 * The store then refuses that session (DATA_LOSS on reads, appends and a re-create of the id)
 * until it is deleted, instead of reusing its seqs. The damaged sessions stay recorded, so a
 * restart does not forget them.
 *
 * Compaction: at open, a file over COMPACT_BYTES is rewritten (one line per live session, plus the
 * damaged ones) to a temporary file, fsynced and renamed over it.
 */
import fs from 'node:fs';
import { crc32c } from './crc32c.js';

/** Rewrite the file at open once it is larger than this. */
const COMPACT_BYTES = 4 * 1024 * 1024;

/** A recorded session head. */
export interface RecordedHead {
  readonly createdAt: number;
  readonly nextSeq: number;
}

/** Parses a heads file; torn or damaged lines are skipped (a torn last line is a crash mid-write). */
export function readHeads(path: string): Map<string, RecordedHead> {
  return readHeadsFile(path).heads;
}

/** What a heads file holds, and whether it can be trusted (issue #33 item 5). */
export interface HeadsFile {
  readonly heads: Map<string, RecordedHead>;
  /** False when there is no file. */
  readonly exists: boolean;
  /** Lines (a torn last line aside) that fail their checksum or do not parse. */
  readonly badLines: number;
  /** The reason of the last unsealed mark (see HeadRecord.unseal), when the file is unsealed. */
  readonly unsealed: string | undefined;
}

/**
 * The mark of an unsealed file: `["", 0, null, reason]`. Session ids are never empty, so a build
 * that does not know the mark reads it as a harmless delete of no session.
 */
const UNSEALED_ID = '';

/** Parses a heads file (see readHeads) and reports damage and an unsealed mark. */
export function readHeadsFile(path: string): HeadsFile {
  const heads = new Map<string, RecordedHead>();
  let text: string;
  try {
    text = fs.readFileSync(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { heads, exists: false, badLines: 0, unsealed: undefined };
    throw e;
  }
  let badLines = 0;
  let unsealed: string | undefined;
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    // The text after the last newline is a torn write (a crash mid-line), not damage.
    const torn = i === lines.length - 1;
    if (line === '') continue;
    const space = line.indexOf(' ');
    const json = space < 0 ? '' : line.slice(space + 1);
    let parsed: [string, number, number | null, string?] | undefined;
    if (space >= 0 && String(crc32c(json)) === line.slice(0, space)) {
      try {
        parsed = JSON.parse(json) as [string, number, number | null, string?];
      } catch {
        parsed = undefined;
      }
    }
    if (!Array.isArray(parsed)) {
      if (!torn) badLines++;
      continue;
    }
    const [id, createdAt, nextSeq, mark] = parsed;
    if (id === UNSEALED_ID) {
      unsealed = typeof mark === 'string' ? mark : 'unsealed';
      continue;
    }
    if (nextSeq === null) {
      if (heads.get(id)?.createdAt === createdAt) heads.delete(id);
      continue;
    }
    const known = heads.get(id);
    if (known === undefined || known.createdAt !== createdAt || known.nextSeq < nextSeq) heads.set(id, { createdAt, nextSeq });
  }
  return { heads, exists: true, badLines, unsealed };
}

/**
 * Writes `heads` as the whole heads file (a temporary file, fsynced, renamed over it): the
 * compaction, and `palimpsest verify --reseal-heads`. With `unsealed`, the file keeps that mark.
 */
export function writeHeadsFile(path: string, heads: ReadonlyMap<string, RecordedHead>, unsealed?: string): void {
  const tmp = `${path}.tmp`;
  let text = '';
  for (const [id, h] of heads) text += line(id, h.createdAt, h.nextSeq);
  if (unsealed !== undefined) text += markLine(unsealed);
  fs.writeFileSync(tmp, text);
  const fd = fs.openSync(tmp, 'r+');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, path);
}

function markLine(reason: string): string {
  const json = JSON.stringify([UNSEALED_ID, 0, null, reason]);
  return `${crc32c(json)} ${json}\n`;
}

function line(id: string, createdAt: number, nextSeq: number | null): string {
  const json = JSON.stringify([id, createdAt, nextSeq]);
  return `${crc32c(json)} ${json}\n`;
}

/** The open heads file of one store. */
export class HeadRecord {
  private fd: number;
  /** The first write error; recording stops after it (the store keeps serving; verify reports it). */
  failed: unknown = undefined;

  /** The reason the file is unsealed (it cannot be trusted to hold every head), if it is. */
  unsealed: string | undefined;

  constructor(readonly path: string, unsealed?: string) {
    this.fd = fs.openSync(path, 'a');
    this.unsealed = unsealed;
    // A torn last line (a crash mid-write) is cut off: the next line written must not be glued to it.
    const size = fs.fstatSync(this.fd).size;
    if (size > 0) {
      const tail = Buffer.alloc(Math.min(size, 64 * 1024));
      const r = fs.openSync(path, 'r+');
      try {
        fs.readSync(r, tail, 0, tail.length, size - tail.length);
        if (tail[tail.length - 1] !== 0x0a) {
          const nl = tail.lastIndexOf(0x0a);
          fs.ftruncateSync(r, nl < 0 ? size - tail.length : size - tail.length + nl + 1);
        }
      } finally {
        fs.closeSync(r);
      }
    }
  }

  /**
   * Marks the file unsealed (missing, emptied or damaged while the database held sessions): the
   * mark stays, and every open reports it, until `palimpsest verify --db F --reseal-heads`.
   */
  unseal(reason: string): void {
    this.unsealed = reason;
    this.write(markLine(reason));
  }

  /** Records heads moved by a commit. */
  heads(heads: readonly (readonly [string, number, number])[]): void {
    let text = '';
    for (const [id, createdAt, next] of heads) text += line(id, createdAt, next);
    this.write(text);
  }

  /** Records a delete. */
  deleted(id: string, createdAt: number): void {
    this.write(line(id, createdAt, null));
  }

  private write(text: string): void {
    if (this.failed !== undefined || this.fd < 0) return;
    try {
      fs.writeSync(this.fd, text);
    } catch (e) {
      this.failed = e;
    }
  }

  /** Rewrites the file from `current()` when it grew past the compaction size. */
  compact(current: () => ReadonlyMap<string, RecordedHead>): void {
    if (fs.fstatSync(this.fd).size <= COMPACT_BYTES) return;
    writeHeadsFile(this.path, current(), this.unsealed);
    fs.closeSync(this.fd);
    this.fd = fs.openSync(this.path, 'a');
  }

  close(): void {
    if (this.fd < 0) return;
    try {
      fs.fsyncSync(this.fd);
    } catch {
      // Best effort: the lines are in the page cache and reach the disk with the kernel's writeback.
    }
    fs.closeSync(this.fd);
    this.fd = -1;
  }
}
