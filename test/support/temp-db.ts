/**
 * A temporary directory for a test file's database files, removed after the file's tests, and
 * fresh paths in it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

export function tempDbDir(prefix: string): { readonly root: string; freshPath(): string } {
  const root = mkdtempSync(join(tmpdir(), prefix));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  let n = 0;
  return { root, freshPath: () => join(root, `db-${n++}.db`) };
}
