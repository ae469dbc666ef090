/**
 * Issue #37: the SQLite store reads a log's token figures as one text (token-figures.ts
 * SELECT_TOKEN_FIGURES); its parse gives back every row: seqs, estimates (-1 = unknown) and usage
 * texts (any number text String() writes), in order.
 */
import { describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { SELECT_TOKEN_FIGURES, tokenFigureRows } from '../../src/store/sqlite/token-figures.js';

describe('tokenFigureRows', () => {
  it('no rows (NULL) is empty', () => {
    expect(tokenFigureRows(null)).toEqual({ seqs: [], tokens: [], usage: [] });
  });

  it('reads the text SQLite builds for the figure columns, in seq order', () => {
    const db = new Database(':memory:');
    db.exec(`CREATE TABLE events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT, surface_op TEXT, source_event_seqs BLOB, ignorable INTEGER,
      scrc INTEGER, dcrc INTEGER, tokens INTEGER, usage TEXT, PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
      CREATE INDEX events_structure ON events (session_id, seq, type, surface_op, source_event_seqs, ignorable, scrc, dcrc, tokens, usage);`);
    const insert = db.prepare('INSERT INTO events (session_id, seq, tokens, usage) VALUES (?, ?, ?, ?)');
    for (const [seq, tokens, usage] of [[12, 7, '0.1,1e+21,0,3'], [3, -1, null], [0, 123456789, null], [5, null, null], [9, null, '1,2,3,4'], [40, 8, null]] as const) insert.run('s', seq, tokens, usage);
    insert.run('other', 1, 5, null);
    const read = db.prepare(SELECT_TOKEN_FIGURES).pluck();
    expect(tokenFigureRows(read.get('s', 0) as string)).toEqual({
      seqs: [0, 3, 9, 12, 40], tokens: [123456789, -1, 0, 7, 8], usage: ['', '', '1,2,3,4', '0.1,1e+21,0,3', ''],
    });
    expect(tokenFigureRows(read.get('s', 10) as string)).toEqual({ seqs: [12, 40], tokens: [7, 8], usage: ['0.1,1e+21,0,3', ''] });
    expect(read.get('s', 41)).toBeNull();
    db.close();
  });
});
