/**
 * Palimpsest's SQLite extension (native/sqlite-checksums.c, built by scripts/build-native.mjs):
 * the row checksums of integrity.ts computed by SQLite over the bytes it already holds, so a read
 * verifies each returned row without walking its text in JavaScript (the JS CRC-32C costs
 * ~2.5 ns per byte, more than the SELECT itself; the extension uses the CPU's crc32 instruction).
 *
 * Where to find it: `PALIMPSEST_SQLITE_EXTENSION` (a path), else `native/build/` of the nearest
 * package directory above this module (the checkout or the installed package, built or bundled).
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
      const candidate = join(dir, 'native', 'build', FILE);
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

/**
 * Loads the extension into `db` per `mode`: true when its functions are available, false when
 * the store verifies in JavaScript. 'require' throws when it cannot be loaded.
 */
export function loadChecksumExtension(db: Database.Database, mode: NativeChecksums): boolean {
  if (mode === 'off') return false;
  const path = checksumExtensionPath();
  if (path === undefined) {
    if (mode === 'require') {
      throw new Error(`the SQLite checksum extension (${FILE}) is not built: run \`npm run build:native\` (needs a C compiler)`);
    }
    return false;
  }
  try {
    // SQLite derives the entry point from the file name: sqlite3_palimpsestchecksums_init.
    db.loadExtension(path);
    return true;
  } catch (e) {
    if (mode === 'require') throw new Error(`cannot load the SQLite checksum extension ${path}: ${(e as Error).message}`, { cause: e });
    return false;
  }
}
