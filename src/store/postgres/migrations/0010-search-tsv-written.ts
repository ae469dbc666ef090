/**
 * Version 10: search_docs.tsv is written by the indexer instead of generated (issue #40).
 *
 * The generated column ran search_normalize, a regexp_replace, in the follower's insert: about a
 * sixth of the PostgreSQL work of indexing an event (bench/search-pg-profile.mjs). The follower
 * now normalises the text in node (../search-docs.ts searchNormalize, the same character class)
 * and writes `to_tsvector('simple', <normalised text>)`; reindex and verify still compute it in
 * SQL with search_normalize (../search-reindex.ts), and verify compares the column.
 *
 * DROP EXPRESSION keeps every stored value and rewrites nothing; it needs PostgreSQL 13 or later,
 * so an older server is refused here with its version named (generated columns need 12 already).
 */
import type { PostgresMigration } from './migration.js';

export const migration: PostgresMigration = {
  version: 10,
  description: 'search_docs.tsv written by the indexer (text normalised in node), no longer a generated column',
  async up(client, s) {
    const r = (await client.query(`SELECT current_setting('server_version_num') AS v`)) as { rows: { v: string }[] };
    const v = Number(r.rows[0]?.v);
    if (!(v >= 130000)) throw new Error(`PostgreSQL 13 or later is required (this server reports server_version_num ${r.rows[0]?.v ?? 'nothing'}): upgrade the server, then start again`);
    await client.query(`ALTER TABLE ${s}.search_docs ALTER COLUMN tsv DROP EXPRESSION`);
  },
};
