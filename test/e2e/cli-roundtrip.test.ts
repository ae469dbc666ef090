/**
 * import -> export round trips through the CLI: reference sessions (multi-turn, compaction,
 * packed chunk rows) come back JSON-equal line by line; a session pruned through `append`
 * survives export -> re-import -> export.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { ensureBuilt } from '../support/server-process.js';
import { cliFor, cliWithInput, jsonLines, type CliResult } from '../support/cli.js';

const FIXTURES = new URL('../fixtures/reference-sessions', import.meta.url).pathname;

let t: TestServer;
let cli: (...args: string[]) => Promise<CliResult>;
let cliIn: (input: string, ...args: string[]) => Promise<CliResult>;

beforeAll(async () => {
  ensureBuilt();
  t = await startTestServer();
  cli = cliFor(t.server.address);
  cliIn = cliWithInput(t.server.address);
});
afterAll(async () => { await t.stop(); });

type Line = Record<string, unknown>;

/** JSONL text as parsed lines, with the header's `id` replaced (imports may rename). */
function parsed(text: string, headerId = 'ID'): Line[] {
  const lines = jsonLines(text) as Line[];
  expect(lines[0]?.type).toBe('session');
  return lines.map((l, i) => (i === 0 ? { ...l, id: headerId } : l));
}

async function ok(r: Promise<CliResult>): Promise<string> {
  const res = await r;
  expect(res.stderr).toBe('');
  expect(res.code).toBe(0);
  return res.stdout;
}

describe('import / export round trip', () => {
  for (const name of ['compaction-recovery', 'agent-instructions', 'goal-multi-turn-actions']) {
    it(`${name}: export is JSON-equal to the original, line by line`, async () => {
      const file = join(FIXTURES, `${name}.jsonl`);
      const original = readFileSync(file, 'utf8');
      const id = JSON.parse(await ok(cli('import', file, '--id', name, '--json'))) as { id: string };
      expect(id).toEqual({ id: name });
      const out = join(t.dir, `${name}.out.jsonl`);
      expect(JSON.parse(await ok(cli('export', name, '-o', out, '--json')))).toEqual({
        id: name, file: out, bytes: Buffer.byteLength(readFileSync(out)), lines: readFileSync(out, 'utf8').split('\n').length - 2,
      });
      const exported = readFileSync(out, 'utf8');
      expect(parsed(exported)).toEqual(parsed(original));
      // Same bytes on stdout as in the file; packed rows stay packed.
      expect(await ok(cli('export', name))).toBe(exported);
      if (name === 'goal-multi-turn-actions') expect(exported).toContain('"type":"text-chunks"');
    });
  }

  it('imports from stdin and prints the header id', async () => {
    const text = readFileSync(join(FIXTURES, 'agent-instructions.jsonl'), 'utf8');
    const headerId = (JSON.parse(text.split('\n')[0]!) as { id: string }).id;
    expect(await ok(cliIn(text, 'import', '-'))).toBe(`${headerId}\n`);
  });

  it('a rejected file leaves no session and names the line', async () => {
    const text = readFileSync(join(FIXTURES, 'compaction-recovery.jsonl'), 'utf8').split('\n');
    text[5] = '{"type":"user/message","seq":4,"time":1,"data":{},"surfaceOp":"append"}';
    const r = await cliIn(text.join('\n'), 'import', '-', '--id', 'broken', '--json');
    expect(r.code).toBe(1);
    const err = jsonLines(r.stderr)[0] as { reason: string; metadata: Record<string, string> };
    expect(err.reason).toBe('MESSAGE_SHAPE');
    expect(err.metadata.line).toBe('6');
    expect((await cli('get', 'broken')).code).toBe(1);
  });

  it('a session pruned through append survives export -> re-import -> export', async () => {
    const src = join(FIXTURES, 'compaction-recovery.jsonl');
    await ok(cli('import', src, '--id', 'prune'));
    const surface = JSON.parse(await ok(cli('surface', 'prune'))) as number[];
    const events = jsonLines(await ok(cli('events', 'prune', '--type', 'tool/result', '--json'))) as { seq: number; data: { message: { content: { content: unknown[] }[] } } }[];
    const target = events.find((e) => surface.includes(e.seq));
    expect(target).toBeDefined();
    const seq = target!.seq;
    const data = structuredClone(target!.data);
    data.message.content[0]!.content = [{ type: 'text', text: '[pruned]' }];
    const batch = [
      { type: 'compaction/prune', data: { shadowedRange: { start: seq, end: seq }, shadowedSeqs: [seq], shadowedTokenCount: 3 } },
      { type: 'tool/result', data, surfaceOp: { op: 'replace', start: seq, end: seq }, sourceEventSeqs: [seq] },
    ];
    const { seqs } = JSON.parse(await ok(cliIn(batch.map((e) => JSON.stringify(e)).join('\n'), 'append', 'prune', '-', '--json'))) as { seqs: number[] };
    expect(seqs).toHaveLength(2);
    const pruned = JSON.parse(await ok(cli('surface', 'prune'))) as number[];
    expect(pruned).toEqual(surface.map((s) => (s === seq ? seqs[1] : s)));

    const first = join(t.dir, 'prune-1.jsonl');
    await ok(cli('export', 'prune', '-o', first));
    await ok(cli('import', first, '--id', 'prune-copy'));
    const second = join(t.dir, 'prune-2.jsonl');
    await ok(cli('export', 'prune-copy', '-o', second));
    const a = readFileSync(first, 'utf8');
    const b = readFileSync(second, 'utf8');
    expect(parsed(b)).toEqual(parsed(a));
    expect(parsed(a).slice(0, -2)).toEqual(parsed(readFileSync(src, 'utf8')));
    expect(JSON.parse(await ok(cli('surface', 'prune-copy')))).toEqual(pruned);
    const messages = JSON.parse(await ok(cli('messages', 'prune-copy', '--json'))) as unknown[];
    expect(messages).toContainEqual(data.message);
  });

  it('a failed export to a file leaves no partial file', async () => {
    const out = join(t.dir, 'missing.jsonl');
    const r = await cli('export', 'no-such-session', '-o', out);
    expect(r.code).toBe(1);
    expect(readdirSync(t.dir).filter((f) => f.startsWith('missing.jsonl'))).toEqual([]);
  });
});
