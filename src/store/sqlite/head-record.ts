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
  const heads = new Map<string, RecordedHead>();
  let text: string;
  try {
    text = fs.readFileSync(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return heads;
    throw e;
  }
  for (const line of text.split('\n')) {
    const space = line.indexOf(' ');
    if (space < 0) continue;
    const json = line.slice(space + 1);
    if (String(crc32c(json)) !== line.slice(0, space)) continue;
    const [id, createdAt, nextSeq] = JSON.parse(json) as [string, number, number | null];
    if (nextSeq === null) {
      if (heads.get(id)?.createdAt === createdAt) heads.delete(id);
      continue;
    }
    const known = heads.get(id);
    if (known === undefined || known.createdAt !== createdAt || known.nextSeq < nextSeq) heads.set(id, { createdAt, nextSeq });
  }
  return heads;
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

  constructor(readonly path: string) {
    this.fd = fs.openSync(path, 'a');
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
    const heads = current();
    const tmp = `${this.path}.tmp`;
    let text = '';
    for (const [id, h] of heads) text += line(id, h.createdAt, h.nextSeq);
    fs.writeFileSync(tmp, text);
    const fd = fs.openSync(tmp, 'r+');
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, this.path);
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
