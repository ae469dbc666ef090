/**
 * `serve --otel-genai-export` configuration (issue #41): the three flags and their environment
 * variables, and where the positions are kept (a file next to a SQLite database, memory for
 * `:memory:`, an explicit file; a PostgreSQL store without one is refused with what to do).
 */
import { describe, expect, it } from 'vitest';
import { parseServeArgs } from '../../src/cli/serve.js';
import { otelGenaiPositions } from '../../src/main.js';
import { FileExportPositions, MemoryExportPositions } from '../../src/store/otel-genai-positions.js';
import { DEFAULT_CONFIG } from '../../src/server/config.js';

describe('otel-genai serve options', () => {
  it('parses the flags and the PALIMPSEST_* variables; off by default', () => {
    expect(parseServeArgs([], {}).otelGenaiExport).toBeUndefined();
    const c = parseServeArgs(['--otel-genai-export', '--otel-genai-positions', '/var/lib/p/pos', '--otel-genai-content'], {});
    expect([c.otelGenaiExport, c.otelGenaiPositions, c.otelGenaiContent]).toEqual([true, '/var/lib/p/pos', true]);
    expect(parseServeArgs([], { PALIMPSEST_OTEL_GENAI_EXPORT: 'true' }).otelGenaiExport).toBe(true);
    expect(parseServeArgs(['--otel-genai-export=false'], {}).otelGenaiExport).toBe(false);
  });

  it('keeps positions next to a SQLite file, in memory for :memory:, where told; refuses PostgreSQL without a file', () => {
    const file = otelGenaiPositions({ ...DEFAULT_CONFIG, db: '/data/p.db' });
    expect(file).toBeInstanceOf(FileExportPositions);
    expect((file as FileExportPositions).path).toBe('/data/p.db.otel-genai-positions');
    expect(otelGenaiPositions({ ...DEFAULT_CONFIG, db: ':memory:' })).toBeInstanceOf(MemoryExportPositions);
    expect((otelGenaiPositions({ ...DEFAULT_CONFIG, db: 'postgresql://u@h/d', otelGenaiPositions: '/x' }) as FileExportPositions).path).toBe('/x');
    expect(() => otelGenaiPositions({ ...DEFAULT_CONFIG, db: 'postgresql://u@h/d' })).toThrow(/needs --otel-genai-positions FILE/);
  });
});

describe('positions journal file', () => {
  it('keeps the last line per session, ignores a torn last line, compacts on replace, refuses a foreign file', async () => {
    const { mkdtempSync, readFileSync, writeFileSync, appendFileSync, rmSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const dir = mkdtempSync(join(tmpdir(), 'otel-pos-'));
    try {
      const path = join(dir, 'pos');
      const p = new FileExportPositions(path);
      expect(await p.load()).toBeUndefined();
      await p.replace(new Map([['a', 3]]));
      await p.save('b', 8);
      await p.save('a', 11);
      await p.close();
      appendFileSync(path, '{"s":"b","n":');
      const again = new FileExportPositions(path);
      expect(await again.load()).toEqual(new Map([['a', 11], ['b', 8]]));
      await again.replace(new Map([['a', 11]]));
      await again.close();
      expect(readFileSync(path, 'utf8').trim().split('\n')).toHaveLength(2);
      writeFileSync(path, 'something else\n');
      await expect(new FileExportPositions(path).load()).rejects.toThrow(/not a Palimpsest otel-genai positions file/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
