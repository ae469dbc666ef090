/** The shape of a PostgreSQL migration file's export (how to add one: index.ts). */

/** What a migration may run its statements on: the migrating transaction's connection. */
export interface MigrationClient {
  query(text: string, values?: unknown[]): Promise<unknown>;
}

/** One step of the schema from `version - 1` to `version`. */
export interface PostgresMigration {
  /** The schema version this migration produces. */
  readonly version: number;
  /** What it does, one line (recorded in schema_migrations, logged). */
  readonly description: string;
  /** The statements for schema `s` (a name matching SCHEMA_NAME_PATTERN, used unquoted), inside the migrating transaction. */
  readonly up: (client: MigrationClient, s: string) => Promise<void>;
}
