/**
 * gen/ is generated output: it must equal what scripts/gen.sh produces from proto/ now.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

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
});
