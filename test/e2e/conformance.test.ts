/**
 * Reference conformance through both front doors (issue #16): the CLI and the gRPC API give the
 * same answers, and the CLI's import options reach the server.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { ensureBuilt } from '../support/server-process.js';
import { cliFor, cliWithInput, jsonLines, type CliResult } from '../support/cli.js';
import { FIXTURES, api, failure, fixture, type Api } from '../support/e2e.js';
import { input } from '../support/events.js';
import type { EventInput } from '../../gen/palimpsest/v1/event.js';

let t: TestServer;
let a: Api;
let cli: (...args: string[]) => Promise<CliResult>;
let cliIn: (input: string, ...args: string[]) => Promise<CliResult>;

beforeAll(async () => {
  ensureBuilt();
  t = await startTestServer();
  a = api(t.client);
  cli = cliFor(t.server.address);
  cliIn = cliWithInput(t.server.address);
});
afterAll(async () => { await t.stop(); });

/** The JSON error a failed --json run printed on stderr. */
function jsonError(r: CliResult): { code: string; reason: string; message: string; metadata: Record<string, string> } {
  const [err, ...rest] = jsonLines(r.stderr);
  expect(rest).toEqual([]);
  return err as { code: string; reason: string; message: string; metadata: Record<string, string> };
}

describe('palimpsest import --allow-seq-gaps (item 10)', () => {
  it('refuses cordis-tool-round without the flag (SEQ_NOT_CONTIGUOUS with line and missing seq, nothing stored) and imports it with the flag', async () => {
    const file = join(FIXTURES, 'cordis-tool-round.jsonl');
    const refused = await cli('import', file, '--id', 'gaps', '--json');
    expect(refused.code).toBe(1);
    expect(jsonError(refused)).toMatchObject({ code: 'FAILED_PRECONDITION', reason: 'SEQ_NOT_CONTIGUOUS', metadata: { line: expect.any(String), missingSeq: expect.any(String) } });
    expect(jsonError(await cli('get', 'gaps', '--json'))).toMatchObject({ reason: 'SESSION_NOT_FOUND' });
    const ok = await cli('import', file, '--id', 'gaps', '--allow-seq-gaps', '--json');
    expect(ok.stderr).toBe('');
    expect(JSON.parse(ok.stdout)).toEqual({ id: 'gaps' });
    expect((await a.getSession({ sessionId: 'gaps' })).session?.eventCount).toBe(60);
  });
});

describe('the 36 reference fixtures through the CLI (done-when)', () => {
  it('import with palimpsest import (cordis-tool-round with --allow-seq-gaps) and export byte-identically', async () => {
    const files = readdirSync(FIXTURES).filter((f) => f.endsWith('.jsonl')).sort();
    expect(files).toHaveLength(36);
    for (const [i, file] of files.entries()) {
      const gaps = file === 'cordis-tool-round.jsonl' ? ['--allow-seq-gaps'] : [];
      const r = await cli('import', join(FIXTURES, file), '--id', `cli-fx-${i}`, '--json', ...gaps);
      expect([file, r.stderr, JSON.parse(r.stdout)]).toEqual([file, '', { id: `cli-fx-${i}` }]);
      const text = readFileSync(join(FIXTURES, file), 'utf8');
      const exported = await a.exportSession(`cli-fx-${i}`);
      expect(exported.split('\n').slice(1), file).toEqual(text.split('\n').slice(1));
    }
  }, 120_000);
});

describe('torn tails (item 12)', () => {
  // A crashed reference writer: the file stops inside its last record.
  const text = fixture('minimal-preset.jsonl').toString('utf8');
  const lastStart = text.lastIndexOf('\n', text.length - 2) + 1;
  const committedLines = text.slice(0, lastStart).split('\n').length - 2; // event lines before the torn one
  const torn = text.slice(0, lastStart + 25);

  it('ImportSession leaves the uncommitted tail out and reports its size; the export is the committed prefix', async () => {
    const res = await a.importSession({ sessionId: 'torn-rpc' }, Buffer.from(torn));
    expect(res.uncommittedTailBytes).toBe(25);
    expect(res.session?.eventCount).toBe(committedLines);
    const exported = await a.exportSession('torn-rpc');
    expect(exported.split('\n').slice(1)).toEqual(text.slice(0, lastStart).split('\n').slice(1));
  });

  it('palimpsest import says so (stderr note; uncommittedTailBytes with --json); a clean file says nothing', async () => {
    const human = await cliIn(torn, 'import', '-', '--id', 'torn-cli');
    expect(human.code).toBe(0);
    expect(human.stdout).toBe('torn-cli\n');
    expect(human.stderr).toContain('uncommitted tail of 25 bytes');
    const json = await cliIn(torn, 'import', '-', '--id', 'torn-cli-2', '--json');
    expect(JSON.parse(json.stdout)).toEqual({ id: 'torn-cli-2', uncommittedTailBytes: 25 });
    const clean = await cliIn(readFileSync(join(FIXTURES, 'minimal-preset.jsonl'), 'utf8'), 'import', '-', '--id', 'clean', '--json');
    expect([clean.stderr, JSON.parse(clean.stdout)]).toEqual(['', { id: 'clean' }]);
  });
});

// ---- one precedence on every path (item 1) -------------------------------------------------

const U = '{"id":"u1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}';
const APPEND = { $case: 'append', value: {} } as const;

interface PrecedenceCase {
  readonly name: string;
  /** The envelope exactly as a client writes it (one JSON line, without seq and time). */
  readonly line: string;
  readonly reason: string;
  /** The same envelope as an AppendEvents EventInput, when the proto can carry it. */
  readonly rpc?: EventInput;
  /** The import reason when import deliberately differs from append (it upgrades steering/message). */
  readonly onImport?: string;
}

const CASES: PrecedenceCase[] = [
  { name: 'surfaceOp null on a log-only type', line: '{"type":"turn/start","data":{"turn":1},"surfaceOp":null}', reason: 'SURFACE_OP_FORBIDDEN' },
  { name: 'a replace-looking surfaceOp on a log-only type', line: '{"type":"note","data":{},"surfaceOp":{"op":"x"}}', reason: 'SURFACE_OP_FORBIDDEN' },
  { name: 'surfaceOp "append" on a log-only type', line: '{"type":"note","data":{},"surfaceOp":"append"}', reason: 'SURFACE_OP_FORBIDDEN', rpc: input('note', {}, { surfaceOp: APPEND }) },
  { name: 'malformed sourceEventSeqs on a log-only type', line: '{"type":"note","data":{},"sourceEventSeqs":"x"}', reason: 'SOURCES_FORBIDDEN' },
  { name: 'non-seq sourceEventSeqs on a log-only type', line: '{"type":"note","data":{},"sourceEventSeqs":[1,"a"]}', reason: 'SOURCES_FORBIDDEN' },
  { name: 'sourceEventSeqs on a log-only type', line: '{"type":"note","data":{},"sourceEventSeqs":[0]}', reason: 'SOURCES_FORBIDDEN', rpc: input('note', {}, { sourceEventSeqs: { seqs: [0] } }) },
  { name: 'an object marker {op:"append"}', line: `{"type":"user/message","data":${U},"surfaceOp":{"op":"append"}}`, reason: 'REPLACE_OP_INVALID' },
  { name: 'an object marker with another op', line: `{"type":"user/message","data":${U},"surfaceOp":{"op":"x","start":0,"end":0}}`, reason: 'REPLACE_OP_INVALID' },
  { name: 'an empty object marker', line: `{"type":"user/message","data":${U},"surfaceOp":{}}`, reason: 'REPLACE_OP_INVALID' },
  { name: 'a replace with an extra key', line: `{"type":"user/message","data":${U},"surfaceOp":{"op":"replace","start":0,"end":0,"x":1}}`, reason: 'REPLACE_OP_INVALID' },
  { name: 'an invalid marker together with invalid citations', line: `{"type":"user/message","data":${U},"surfaceOp":{"op":"x"},"sourceEventSeqs":"bad"}`, reason: 'REPLACE_OP_INVALID' },
  { name: 'surfaceOp null on a surface type', line: `{"type":"user/message","data":${U},"surfaceOp":null}`, reason: 'SURFACE_OP_INVALID' },
  { name: 'an unknown surfaceOp string', line: `{"type":"user/message","data":${U},"surfaceOp":"bogus"}`, reason: 'SURFACE_OP_INVALID' },
  { name: 'no surfaceOp on a surface type', line: `{"type":"user/message","data":${U}}`, reason: 'SURFACE_OP_REQUIRED', rpc: input('user/message', JSON.parse(U)) },
  { name: 'sourceEventSeqs that is not an array', line: `{"type":"user/message","data":${U},"surfaceOp":"append","sourceEventSeqs":"x"}`, reason: 'SOURCES_NOT_ARRAY' },
  { name: 'a fractional citation', line: `{"type":"user/message","data":${U},"surfaceOp":"append","sourceEventSeqs":[0.5]}`, reason: 'SOURCES_NOT_SEQ' },
  { name: 'an empty citation list on a user message', line: `{"type":"user/message","data":${U},"surfaceOp":"append","sourceEventSeqs":[]}`, reason: 'SOURCES_EMPTY', rpc: input('user/message', JSON.parse(U), { surfaceOp: APPEND, sourceEventSeqs: { seqs: [] } }) },
  { name: 'a citation of a later event', line: `{"type":"user/message","data":${U},"surfaceOp":"append","sourceEventSeqs":[3]}`, reason: 'SOURCES_NOT_EARLIER', rpc: input('user/message', JSON.parse(U), { surfaceOp: APPEND, sourceEventSeqs: { seqs: [3] } }) },
  { name: 'a message shape error with an unrepresentable marker', line: '{"type":"user/message","data":{},"surfaceOp":null}', reason: 'MESSAGE_SHAPE' },
  { name: 'data that is not lossless JSON (1e400, -0)', line: '{"type":"note","data":{"v":1e400,"z":-0}}', reason: 'NOT_JSON', rpc: { ...input('note', null), data: { kind: { $case: 'json', value: '{"v":1e400,"z":-0}' } } } },
  { name: 'NOT_JSON inside a marker before SURFACE_OP_FORBIDDEN', line: '{"type":"note","data":{},"surfaceOp":{"start":-0}}', reason: 'NOT_JSON' },
  { name: 'ignorable false', line: '{"type":"note","data":{},"ignorable":false}', reason: 'ENVELOPE_INVALID' },
  { name: 'an unknown envelope key', line: '{"type":"note","data":{},"extra":1}', reason: 'ENVELOPE_INVALID' },
  { name: 'a non-string type', line: '{"type":5,"data":{}}', reason: 'ENVELOPE_INVALID' },
  { name: 'steering/message on append', line: '{"type":"steering/message","data":{"turn":1,"content":[],"source":{"kind":"user"}},"surfaceOp":null}', reason: 'LEGACY_VOCABULARY', onImport: 'SURFACE_OP_INVALID' },
  { name: 'an empty type (accepted)', line: '{"type":"","data":{}}', reason: 'OK', rpc: input('', {}) },
];

/** The line with `"seq":0,"time":1` added as text (so number spellings such as 1e400 and -0 stay as written). */
function withSeqAndTime(line: string): string {
  return `{"seq":0,"time":1,${line.slice(1)}`;
}

async function reasonOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'OK';
  } catch (e) {
    return (await failure(Promise.reject(e))).reason;
  }
}

describe('envelope precedence: the CLI and the gRPC API give the same reason (items 1 and 2)', () => {
  it.each(CASES.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const id = `prec-${CASES.indexOf(c)}`;
    // CLI append into an empty session.
    await a.createSession({ sessionId: id });
    const r = await cliIn(`${c.line}\n`, 'append', id, '-', '--json');
    const cliReason = r.code === 0 ? 'OK' : jsonError(r).reason;
    // gRPC ImportSession of the same envelope as the first event of a file (every shape fits).
    const file = `{"type":"session","version":0,"id":"x","createdAt":1}\n${withSeqAndTime(c.line)}\n`;
    const importReason = await reasonOf(a.importSession({ sessionId: `${id}-imp` }, Buffer.from(file)));
    // gRPC AppendEvents, where the proto can carry the envelope.
    const rpcReason = c.rpc === undefined ? c.reason : await reasonOf((async () => {
      await a.createSession({ sessionId: `${id}-rpc` });
      await a.appendEvents({ sessionId: `${id}-rpc`, events: [c.rpc!] });
    })());
    expect({ cli: cliReason, import: importReason, rpc: rpcReason }).toEqual({ cli: c.reason, import: c.onImport ?? c.reason, rpc: c.reason });
    // A rejection stores nothing.
    if (c.reason !== 'OK') expect((await a.getSession({ sessionId: id })).session?.eventCount).toBe(0);
  });

  it('the CLI sends data as read: 1e400 and -0 are refused as NOT_JSON, never stored as null and 0; lossless data is stored exactly', async () => {
    await a.createSession({ sessionId: 'asread' });
    const bad = await cliIn('{"type":"note","data":{"v":1e400,"z":-0}}\n', 'append', 'asread', '-', '--json');
    expect(jsonError(bad)).toMatchObject({ reason: 'NOT_JSON' });
    const text = '{"v":1.5,"s":"é\\n","n":[1,{"a":null}]}';
    expect((await cliIn(`{"type":"note","data":${text}}\n`, 'append', 'asread', '-')).code).toBe(0);
    const events = await a.listEvents({ sessionId: 'asread' });
    expect(events.events.map((e) => e.data?.kind)).toEqual([{ $case: 'json', value: text }]);
  });
});
