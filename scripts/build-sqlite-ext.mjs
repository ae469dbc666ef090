#!/usr/bin/env node
// Builds sqlite-ext/sqlite-checksums.c, Palimpsest's SQLite extension (the row checksums computed over
// the bytes SQLite holds), into sqlite-ext/build/ (Linux and macOS). Run by `npm install` (the prepare script) and by
// `npm run build:sqlite-ext`. Needs a C compiler (cc, gcc, clang or g++); without one it says so and exits 0,
// and the SQLite store verifies rows in JavaScript instead (the same checksums, slower reads).
// With --require, or under CI=true, a failed build is an error.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const source = join(root, 'sqlite-ext', 'sqlite-checksums.c');
const outDir = join(root, 'sqlite-ext', 'build');
const out = join(outDir, process.platform === 'darwin' ? 'palimpsest_checksums.dylib' : 'palimpsest_checksums.so');
const require = createRequire(import.meta.url);
const required = process.argv.includes('--require') || process.env.CI === 'true';

let attempted = false;
let tmp = '';
function fail(message) {
  // A failed rebuild must not leave the previous build behind: the store would load a library
  // older than its decoder (it checks the line format, but not having it at all is plainer).
  if (attempted) {
    rmSync(out, { force: true });
    rmSync(tmp, { force: true });
  }
  if (required) {
    console.error(`build-sqlite-ext: ${message}`);
    process.exit(1);
  }
  console.warn(`build-sqlite-ext: ${message}; the SQLite store will verify row checksums in JavaScript (slower reads)`);
  process.exit(0);
}

let include;
try {
  include = join(dirname(require.resolve('better-sqlite3/package.json')), 'deps', 'sqlite3');
} catch {
  fail('better-sqlite3 is not installed yet');
}
if (!existsSync(join(include, 'sqlite3ext.h'))) fail(`no sqlite3ext.h in ${include}`);
if (existsSync(out) && statSync(out).mtimeMs >= statSync(source).mtimeMs && !process.argv.includes('--force')) process.exit(0);

// $CC may carry arguments ("ccache gcc"); a C++ driver compiles it as C with -x c (a machine may
// have g++ and no cc alternative).
const fromEnv = (process.env.CC ?? '').trim().split(/\s+/).filter(Boolean);
const compilers = [fromEnv, ['cc'], ['gcc'], ['clang'], ['g++', '-x', 'c'], ['c++', '-x', 'c']].filter((c) => c.length > 0);
attempted = true;
mkdirSync(outDir, { recursive: true });
tmp = `${out}.${process.pid}.tmp`;
const errors = [];
for (const [cc, ...lang] of compilers) {
  try {
    const shared = process.platform === 'darwin' ? ['-dynamiclib', '-undefined', 'dynamic_lookup'] : ['-shared'];
    // -Wall without -Werror: a newer compiler's new warning must not cost an install its build.
    execFileSync(cc, [...lang, '-O2', '-fPIC', ...shared, '-Wall', `-I${include}`, '-o', tmp, source], { stdio: 'pipe' });
    renameSync(tmp, out);
    process.exit(0);
  } catch (e) {
    errors.push(`${cc}: ${e.code === 'ENOENT' ? 'not found' : String(e.stderr || e.message).trim()}`);
  }
}
fail(`could not compile ${source}:\n  ${errors.join('\n  ')}`);
