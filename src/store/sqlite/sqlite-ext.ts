/**
 * Palimpsest's SQLite extension (sqlite-ext/sqlite-checksums.c, built by scripts/build-sqlite-ext.mjs):
 * the row checksums of integrity.ts computed by SQLite over the bytes it already holds, so a read
 * verifies each returned row without walking its text in JavaScript (the JS CRC-32C costs
 * ~2.5 ns per byte, more than the SELECT itself; the extension uses the CPU's crc32 instruction).
 *
 * Where to find it: `PALIMPSEST_SQLITE_EXTENSION` (a path), else `sqlite-ext/build/` of the nearest
 * package directory above this module (the checkout or the installed package, built or bundled).
 * A build whose line format differs from this code's is not used (see loadChecksumExtension).
 * Without it the store computes the same checksums in JavaScript: slower reads, the same rule.
 */
import { existsSync } from 'node:fs';
import { dirname, join, parse } from 'node:path';
import { fileURLToPath } from 'node:url';
import type Database from 'better-sqlite3';

/** How the store uses the extension: 'auto' (default) when it loads, 'require' or fail, 'off'. */
export type NativeChecksums = 'auto' | 'require' | 'off';

const FILE = process.platform === 'darwin' ? 'palimpsest_checksums.dylib' : 'palimpsest_checksums.so';

let located: string | null | undefined;

/** The extension's path, or undefined when it was not built. */
export function checksumExtensionPath(): string | undefined {
  const fromEnv = process.env['PALIMPSEST_SQLITE_EXTENSION'];
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  if (located === undefined) {
    located = null;
    let dir = dirname(fileURLToPath(import.meta.url));
    for (;;) {
      const candidate = join(dir, 'sqlite-ext', 'build', FILE);
      if (existsSync(candidate)) {
        located = candidate;
        break;
      }
      if (existsSync(join(dir, 'package.json')) || dir === parse(dir).root) break;
      dir = dirname(dir);
    }
  }
  return located ?? undefined;
}

/** What loading gave: whether reads verify in SQLite, and why not when a built or configured extension could not be used. */
export interface ChecksumExtension {
  readonly loaded: boolean;
  /** Why it is not used ('auto': not built, not loadable, another version); the server logs it. */
  readonly problem?: string;
  /** True when the CPU's CRC-32C instruction is in use (loaded only). */
  readonly hardwareCrc?: boolean;
  /**
   * The version of the wire format its encoded ListEvents pages are written in (loaded only;
   * src/server/wire/event-page.ts EVENT_PAGE_FORMAT is the server's): the store's eventPageFormat.
   */
  readonly eventPageFormat?: number;
}

/** The extension's entry point (sqlite-ext/sqlite-checksums.c). */
const ENTRY_POINT = 'sqlite3_palimpsestchecksums_init';

/**
 * Loads the extension into `db` per `mode`. 'require' throws when it cannot be loaded or its
 * line format is not `format` (LINE_FORMAT of row-codec.ts: a stale build is never used).
 */
export function loadChecksumExtension(db: Database.Database, mode: NativeChecksums, format: number): ChecksumExtension {
  if (mode === 'off') return { loaded: false };
  const path = checksumExtensionPath();
  if (path === undefined) {
    const notBuilt = `the SQLite checksum extension (${FILE}) is not built: run \`npm run build:sqlite-ext\` (needs a C compiler)`;
    if (mode === 'require') throw new Error(notBuilt);
    return { loaded: false, problem: `${notBuilt}; row checksums are verified in JavaScript (slower reads)` };
  }
  let problem: string;
  try {
    (db.loadExtension as (file: string, entryPoint?: string) => Database.Database).call(db, path, ENTRY_POINT);
    const built = db.prepare('SELECT palimpsest_checksums_format()').pluck().get() as number;
    if (built === format) {
      return {
        loaded: true,
        hardwareCrc: db.prepare('SELECT palimpsest_checksums_hw()').pluck().get() === 1,
        eventPageFormat: db.prepare('SELECT palimpsest_event_page_format()').pluck().get() as number,
      };
    }
    problem = `the SQLite checksum extension ${path} writes line format ${built}, this build reads ${format}: rebuild it with \`npm run build:sqlite-ext\``;
  } catch (e) {
    problem = `cannot load the SQLite checksum extension ${path}: ${(e as Error).message}`;
  }
  if (mode === 'require') throw new Error(problem);
  return { loaded: false, problem: `${problem}; row checksums are verified in JavaScript (slower reads)` };
}
