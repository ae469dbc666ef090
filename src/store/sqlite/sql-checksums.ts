/**
 * The writer's row checksums computed by SQLite (issue #37): with the checksum extension loaded
 * (sqlite-ext.ts), the group commit's INSERTs compute each row's `scrc` and `dcrc` with
 * palimpsest_scrc / palimpsest_dcrc over the values being written, and the session digest is
 * chained over the rows a group wrote by palimpsest_digest, instead of the CRC-32C of every row's
 * text in JavaScript (integrity.ts: ~0.6 us per row of 200 bytes, the extension's hardware CRC a
 * small part of that). The checksums are the same numbers (integrity.ts defines them; tested both
 * ways). Without the extension the rows carry their JavaScript checksums (addChecksums) and
 * Statements.insertEvents writes them as given.
 */
import type Database from 'better-sqlite3';
import type { EventRow } from './row-codec.js';

/** Values bound per row: every EventRow column but the two checksums. */
const BOUND = 10;
/**
 * Rows per multi-row INSERT, largest first (the rest one by one). In this form 25 rows per
 * statement cost ~0.14 us less per row than 10 (the same rows, 1.78 against 1.93 us of CPU); 10
 * keeps 10-event calls in one statement.
 */
const CHUNKS = [25, 10] as const;
const ROW = `(${Array<string>(BOUND).fill('?').join(', ')})`;
/** VALUES' columnN in EventRow order without the checksums: 1 session, 2 seq, 3 type, 4 time, 5 data, 6 seqs, 7 op, 8 ignorable, 9 tokens, 10 usage. */
const INSERT = (rows: number): string =>
  `INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, surface_op, ignorable, scrc, dcrc, tokens, usage)
   SELECT column1, column2, column3, column4, column5, column6, column7, column8,
     palimpsest_scrc(column2, column7, column6, column8, column3), palimpsest_dcrc(column4, column5), column9, column10
   FROM (VALUES ${Array<string>(rows).fill(ROW).join(', ')})`;

/** The INSERTs and the digest with checksums by SQLite; prepare only on a connection with the extension loaded. */
export interface SqlChecksums {
  /** Inserts rows whose scrc and dcrc are not set (SQLite computes them). */
  insertEvents(rows: readonly EventRow[]): void;
  /**
   * The digest of session `sessionId` chained from `digest` over its rows with seqs `from` to
   * `to - 1` (as they are in the transaction: the rows the group wrote). Throws unless there are
   * exactly `count` of them (a row already stored in that range is not the group's).
   */
  digestFrom(sessionId: string, from: number, to: number, count: number, digest: number): number;
}

export function prepareSqlChecksums(db: Database.Database): SqlChecksums {
  const one = db.prepare(INSERT(1));
  const chunks = CHUNKS.map((n) => ({ n, st: db.prepare(INSERT(n)), args: new Array<unknown>(n * BOUND) }));
  // The rows in key order (no sorter); palimpsest_digest refuses any other order.
  const digest = db
    .prepare('SELECT palimpsest_digest(d, seq, scrc, dcrc), count(*) FROM (SELECT ? AS d, seq, scrc, dcrc FROM events WHERE session_id = ? AND seq >= ? AND seq < ? ORDER BY seq)')
    .raw();
  const put = (args: unknown[], r: EventRow, at: number): void => {
    args[at] = r[0];
    args[at + 1] = r[1];
    args[at + 2] = r[2];
    args[at + 3] = r[3];
    args[at + 4] = r[4];
    args[at + 5] = r[5];
    args[at + 6] = r[6];
    args[at + 7] = r[7];
    args[at + 8] = r[10];
    args[at + 9] = r[11];
  };
  return {
    insertEvents(rows) {
      let i = 0;
      for (const { n, st, args } of chunks) {
        if (i + n > rows.length) continue;
        try {
          for (; i + n <= rows.length; i += n) {
            for (let k = 0; k < n; k++) put(args, rows[i + k]!, k * BOUND);
            st.run(...args);
          }
        } finally {
          // Holds no row past the call (nor past a failed one).
          args.fill(undefined);
        }
      }
      for (; i < rows.length; i++) {
        const r = rows[i]!;
        one.run(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[10], r[11]);
      }
    },
    digestFrom(sessionId, from, to, count, start) {
      const [d, n] = digest.get(start, sessionId, from, to) as [number | null, number];
      if (n !== count) throw new Error(`session ${sessionId}: ${n} rows stored at seqs ${from}..${to - 1}, the group wrote ${count}`);
      return d ?? start;
    },
  };
}
