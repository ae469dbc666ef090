/**
 * gen/, clients/go/gen/ and clients/typescript/src/gen/ are generated output: they must equal what
 * scripts/gen.sh produces from proto/ now.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { missingGo, toolchainIt } from '../support/toolchains.js';

function files(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...files(p));
    else out.push(p);
  }
  return out;
}

describe('gen/', () => {
  it('is exactly what scripts/gen.sh generates from proto/ (no stale, missing or extra files)', () => {
    const tmp = mkdtempSync(join(tmpdir(), 'palimpsest-gen-'));
    try {
      execFileSync('scripts/gen.sh', [join(tmp, 'gen')], { stdio: 'pipe' });
      const fresh = files(join(tmp, 'gen')).map((f) => relative(join(tmp, 'gen'), f)).sort();
      const committed = files('gen').map((f) => relative('gen', f)).sort();
      expect(committed).toEqual(fresh);
      for (const f of fresh) {
        expect(readFileSync(join('gen', f)).equals(readFileSync(join(tmp, 'gen', f))), `gen/${f} is stale: run scripts/gen.sh`).toBe(true);
      }
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }, 60_000);

  toolchainIt('go', missingGo(), 'the clients\' copies (clients/go/gen, clients/typescript/src/gen) are what scripts/gen.sh generates', async () => {
    const tmp = mkdtempSync(join(tmpdir(), 'palimpsest-gen-clients-'));
    try {
      execFileSync('scripts/gen.sh', [join(tmp, 'gen'), join(tmp, 'clients')], { stdio: 'pipe' });
      for (const dir of ['go/gen', 'typescript/src/gen']) {
        const fresh = join(tmp, 'clients', dir);
        const committed = join('clients', dir);
        const names = files(fresh).map((f) => relative(fresh, f)).sort();
        expect(files(committed).map((f) => relative(committed, f)).sort()).toEqual(names);
        for (const f of names) {
          expect(readFileSync(join(committed, f)).equals(readFileSync(join(fresh, f))), `clients/${dir}/${f} is stale: run scripts/gen.sh`).toBe(true);
        }
      }
      expect(files('clients/go/gen').length).toBeGreaterThan(4);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }, 60_000);
});
