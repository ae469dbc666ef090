/** The shape of a SQLite migration file's export (how to add one: index.ts). */
import type Database from 'better-sqlite3';

/** One step of the schema from `version - 1` to `version`. */
export interface SqliteMigration {
  /** The schema version this migration produces. */
  readonly version: number;
  /** What it does, one line (recorded in schema_migrations, logged). */
  readonly description: string;
  /** The statements, run inside the migration transaction. */
  readonly up: (db: Database.Database) => void;
}
