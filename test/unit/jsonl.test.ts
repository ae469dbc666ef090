import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/domain/errors.js';
import type { CandidateEvent, Json, SessionEvent, SessionHeader } from '../../src/domain/event.js';
import {
  assertUncompressed,
  decodeJsonl,
  isZstdFramed,
  JsonlDecoder,
  JsonlLineSplitter,
} from '../../src/domain/jsonl-reader.js';
import { encodeJsonl, JsonlEncoder } from '../../src/domain/jsonl-writer.js';
import { parseHeaderLine, validateSessionHeader } from '../../src/domain/jsonl-header.js';
import { SessionEngine } from '../../src/domain/session-engine.js';

const FIXTURES = new URL('../fixtures/reference-sessions', import.meta.url).pathname;
const fixtureFiles = readdirSync(FIXTURES)
  .filter((f) => f.endsWith('.jsonl'))
  .sort();

function readFixture(name: string): string {
  return readFileSync(join(FIXTURES, name), 'utf8');
}

function expectDomainError(fn: () => unknown, reason: string): DomainError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(DomainError);
    expect((err as DomainError).reason).toBe(reason);
    return err as DomainError;
  }
  throw new Error(`expected a DomainError ${reason}`);
}

const HEADER: SessionHeader = { version: 0, id: 's1', createdAt: 1, delegationDepth: 0 };
const HEADER_LINE = '{"type":"session","version":0,"id":"s1","createdAt":1,"delegationDepth":0}';

describe('JSONL round trip on the reference fixtures', () => {
  it('has all 36 fixtures', () => {
    expect(fixtureFiles).toHaveLength(36);
  });

  it('decodes 8072 events in total (packed rows unpacked)', () => {
    let total = 0;
    for (const f of fixtureFiles) total += decodeJsonl(readFixture(f)).events.length;
    expect(total).toBe(8072);
  });

  it.each(fixtureFiles)('%s: parse -> unpack -> repack reproduces every line (JSON-equal, and byte-equal)', (file) => {
    const text = readFixture(file);
    const { header, events } = decodeJsonl(text);
    const out = encodeJsonl(header, events as unknown as SessionEvent[]);
    const original = text.split('\n');
    const exported = out.split('\n');
    expect(exported.length).toBe(original.length);
    for (let i = 0; i < original.length; i++) {
      const a = original[i] as string;
      const b = exported[i] as string;
      if (a === '') expect(b).toBe('');
      else expect(JSON.parse(b), `${file} line ${i + 1}`).toStrictEqual(JSON.parse(a));
    }
    expect(out).toBe(text);
  });

  it('unpacks a packed row into the exact assistant/chunk events (time accumulates dt)', () => {
    const text = [
      HEADER_LINE,
      '{"type":"text-chunks","seq0":4,"time0":100,"data":{"turn":1,"step":2,"index":1,"dt":[5,-2],"texts":["a","b","c"]}}',
      '{"type":"tool-call-chunks","seq0":7,"time0":50,"data":{"turn":1,"step":2,"index":2,"dt":[0,1],"id":"c1","name":"bash","args":["{","\\"x","}"]}}',
      '{"type":"tool-call-chunks","seq0":10,"time0":60,"data":{"turn":1,"step":2,"index":3,"dt":[1,1],"id":"c2","args":["","{","}"]}}',
      '',
    ].join('\n');
    const { events } = decodeJsonl(text);
    expect(events.slice(0, 4)).toStrictEqual([
      { type: 'assistant/chunk', seq: 4, time: 100, data: { turn: 1, step: 2, chunk: { type: 'text-delta', index: 1, text: 'a' } } },
      { type: 'assistant/chunk', seq: 5, time: 105, data: { turn: 1, step: 2, chunk: { type: 'text-delta', index: 1, text: 'b' } } },
      { type: 'assistant/chunk', seq: 6, time: 103, data: { turn: 1, step: 2, chunk: { type: 'text-delta', index: 1, text: 'c' } } },
      {
        type: 'assistant/chunk',
        seq: 7,
        time: 50,
        data: { turn: 1, step: 2, chunk: { type: 'tool-call-delta', index: 2, id: 'c1', name: 'bash', argumentsDelta: '{' } },
      },
    ]);
    expect(events[6]).toStrictEqual({
      type: 'assistant/chunk',
      seq: 10,
      time: 60,
      data: { turn: 1, step: 2, chunk: { type: 'tool-call-delta', index: 3, id: 'c2', argumentsDelta: '' } },
    });
    expect(encodeJsonl(HEADER, events as unknown as SessionEvent[])).toBe(text);
  });
});

describe('JSONL import through the engine', () => {
  it.each(fixtureFiles)('%s: every decoded event is accepted in import mode, and the accepted log exports to the same file', (file) => {
    const text = readFixture(file);
    const decoder = new JsonlDecoder();
    const engine = SessionEngine.create();
    const accepted: SessionEvent[] = [];
    const splitter = new JsonlLineSplitter();
    let batch: CandidateEvent[] = [];
    const flush = (): void => {
      const plan = engine.plan(batch, { mode: 'import', now: () => 0, sessionId: decoder.header?.id ?? '', lookup: (seq) => accepted.find((e) => e.seq === seq), allowSeqGaps: file === 'cordis-tool-round.jsonl' });
      engine.commit(plan);
      accepted.push(...plan.events);
      batch = [];
    };
    for (const line of [...splitter.push(text), ...splitter.end()]) {
      batch.push(...decoder.push(line));
      if (batch.length >= 64) flush();
    }
    flush();
    const header = decoder.finish();
    expect(engine.eventCount).toBe(accepted.length);
    expect(encodeJsonl(header, accepted)).toBe(text);
  });
});

describe('JSONL header', () => {
  it('refuses a newer version, naming both versions and the direction', () => {
    const err = expectDomainError(() => parseHeaderLine('{"type":"session","version":3,"id":"x","createdAt":1}'), 'FORMAT_VERSION_UNSUPPORTED');
    expect(err.message).toContain('3');
    expect(err.message).toContain('0');
    expect(err.message).toMatch(/written by a newer harness.*upgrade/);
    expect(err.metadata).toMatchObject({ version: '3', supportedVersion: '0', direction: 'newer' });
  });

  it('refuses an older version with "no upgrade path"', () => {
    const err = expectDomainError(() => parseHeaderLine('{"type":"session","version":-1,"id":"x","createdAt":1}'), 'FORMAT_VERSION_UNSUPPORTED');
    expect(err.message).toContain('no upgrade path');
    expect(err.message).toContain('-1');
    expect(err.metadata).toMatchObject({ version: '-1', supportedVersion: '0', direction: 'older' });
  });

  it('refuses the version before looking at any other header field or line', () => {
    // id and createdAt are invalid too, and the next line is garbage: the version is reported.
    const decoder = new JsonlDecoder();
    expectDomainError(() => decoder.push('{"type":"session","version":1,"id":5,"createdAt":-3,"bogus":true}'), 'FORMAT_VERSION_UNSUPPORTED');
    expectDomainError(() => parseHeaderLine('{"type":"session","id":"x","createdAt":1}'), 'FORMAT_VERSION_UNSUPPORTED');
    expectDomainError(() => parseHeaderLine('{"type":"session","version":"0","id":"x","createdAt":1}'), 'FORMAT_VERSION_UNSUPPORTED');
  });

  it.each([
    ['{"type":"session","version":0,"id":"","createdAt":1}', 'id'],
    ['{"type":"session","version":0,"id":"x","createdAt":-1}', 'createdAt'],
    ['{"type":"session","version":0,"id":"x","createdAt":1.5}', 'createdAt'],
    ['{"type":"session","version":0,"id":"x","createdAt":1,"cwd":"relative/dir"}', 'cwd'],
    ['{"type":"session","version":0,"id":"x","createdAt":1,"parentSession":7}', 'parentSession'],
    ['{"type":"session","version":0,"id":"x","createdAt":1,"seedLength":-1}', 'seedLength'],
    ['{"type":"session","version":0,"id":"x","createdAt":1,"origin":"user"}', 'origin'],
    ['{"type":"session","version":0,"id":"x","createdAt":1,"delegationDepth":0.5}', 'delegationDepth'],
    ['{"type":"session","version":0,"id":"x","createdAt":1,"agentPreset":false}', 'agentPreset'],
    ['{"type":"session","version":0,"id":"x","createdAt":1,"extra":1}', 'extra'],
    ['{"type":"session","version":0,"id":"x\\ud800","createdAt":1}', 'id'],
    ['{"type":"session","version":0,"id":"x","createdAt":1,"agentPreset":"\\udfffp"}', 'agentPreset'],
  ])('refuses %s (field %s)', (line, field) => {
    const err = expectDomainError(() => parseHeaderLine(line), 'HEADER_INVALID');
    expect(err.metadata['field']).toBe(field);
  });

  it('requires the id to match the expected session id when given', () => {
    expectDomainError(() => parseHeaderLine(HEADER_LINE, 'other'), 'HEADER_INVALID');
    expect(parseHeaderLine(HEADER_LINE, 's1')).toStrictEqual(HEADER);
  });

  it('keeps exactly the present fields (absent stays absent)', () => {
    const h = validateSessionHeader({
      version: 0,
      id: 'c',
      createdAt: 5,
      cwd: 'C:\\work',
      parentSession: 'p',
      seedLength: 3,
      origin: 'subagent',
      delegationDepth: 1,
      agentPreset: 'minimal',
    });
    expect(Object.keys(h)).toStrictEqual(['version', 'id', 'createdAt', 'cwd', 'parentSession', 'seedLength', 'origin', 'delegationDepth', 'agentPreset']);
    expect(Object.keys(validateSessionHeader({ version: 0, id: 'c', createdAt: 5 }))).toStrictEqual(['version', 'id', 'createdAt']);
  });
});

describe('JSONL decoder errors', () => {
  it.each([
    ['not JSON', '{"type":"turn/start",'],
    ['an array', '[1,2]'],
    ['a string', '"x"'],
    ['null', 'null'],
    ['a second header', '{"type":"session","version":0,"id":"s1","createdAt":1}'],
    ['a packed row with unknown keys', '{"type":"text-chunks","seq0":1,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]},"x":1}'],
    ['a packed row with dt of the wrong length', '{"type":"text-chunks","seq0":1,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[1,2],"texts":["a","b"]}}'],
    ['a packed row with a non-string member', '{"type":"reasoning-chunks","seq0":1,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a",2]}}'],
    ['a packed row with no members', '{"type":"reasoning-chunks","seq0":1,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":[]}}'],
    ['a packed row with a bad seq0', '{"type":"text-chunks","seq0":-1,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]}}'],
    ['a packed row with a fractional dt', '{"type":"text-chunks","seq0":1,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[0.5],"texts":["a","b"]}}'],
    ['a tool-call row without id', '{"type":"tool-call-chunks","seq0":1,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[],"args":["a"]}}'],
    ['a tool-call row with texts', '{"type":"tool-call-chunks","seq0":1,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[],"id":"c","texts":["a"]}}'],
    ['a tool-call row with a non-string name', '{"type":"tool-call-chunks","seq0":1,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[],"id":"c","name":null,"args":["a"]}}'],
  ])('gives JSONL_INVALID with the line number for %s', (_what, line) => {
    const decoder = new JsonlDecoder();
    decoder.push(HEADER_LINE);
    decoder.push('{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}');
    const err = expectDomainError(() => decoder.push(line), 'JSONL_INVALID');
    expect(err.metadata['line']).toBe('3');
    expect(err.message).toMatch(/^line 3: /);
  });

  it.each([
    ['turn', '{"turn":-0,"step":1,"index":0}', /turn is -0/],
    ['step', '{"turn":1,"step":-0,"index":0}', /step is -0/],
    ['index', '{"turn":1,"step":1,"index":-0}', /index is -0/],
    ['turn', '{"turn":"1","step":1,"index":0}', /turn is a string/],
  ])('names what is wrong with a packed row\'s %s (%s)', (_field, nums, message) => {
    const decoder = new JsonlDecoder();
    decoder.push(HEADER_LINE);
    const line = `{"type":"text-chunks","seq0":1,"time0":1,"data":${nums.slice(0, -1)},"dt":[],"texts":["a"]}}`;
    const err = expectDomainError(() => decoder.push(line), 'JSONL_INVALID');
    expect(err.message).toMatch(message);
    expect(err.message).not.toMatch(/must be numbers$/);
    if (nums.includes('-0')) expect(err.message).toMatch(/write 0/);
  });

  it('requires the header on line 1 and refuses an empty file', () => {
    expectDomainError(() => new JsonlDecoder().push('{"type":"turn/start","seq":0,"time":1,"data":{}}'), 'HEADER_INVALID');
    expectDomainError(() => new JsonlDecoder().push(''), 'JSONL_INVALID');
    expectDomainError(() => new JsonlDecoder().finish(), 'JSONL_INVALID');
  });

  it('passes ordinary event lines through as candidates (validation is the engine’s)', () => {
    const { events } = decodeJsonl(`${HEADER_LINE}\n{"type":"x","seq":"not a seq","extra":1}\n`);
    expect(events).toStrictEqual([{ type: 'x', seq: 'not a seq', extra: 1 }]);
  });

  it('refuses zstd-framed input with JSONL_COMPRESSED_UNSUPPORTED (bytes or decoded text)', () => {
    const bytes = new Uint8Array([0x28, 0xb5, 0x2f, 0xfd, 0x04, 0x00]);
    expect(isZstdFramed(bytes)).toBe(true);
    expect(isZstdFramed(new TextEncoder().encode(HEADER_LINE))).toBe(false);
    const err = expectDomainError(() => assertUncompressed(bytes), 'JSONL_COMPRESSED_UNSUPPORTED');
    expect(err.message).toMatch(/zstd/);
    expectDomainError(() => new JsonlDecoder().push(new TextDecoder().decode(bytes)), 'JSONL_COMPRESSED_UNSUPPORTED');
    expectDomainError(() => new JsonlDecoder().push(new TextDecoder('latin1').decode(bytes)), 'JSONL_COMPRESSED_UNSUPPORTED');
  });
});

describe('JSONL streaming', () => {
  it('splits streamed text into lines across chunk borders', () => {
    const splitter = new JsonlLineSplitter();
    expect(splitter.push('ab')).toStrictEqual([]);
    expect(splitter.push('c\nde\n\nf')).toStrictEqual(['abc', 'de', '']);
    expect(splitter.end()).toStrictEqual(['f']);
    expect(splitter.end()).toStrictEqual([]);
  });

  it('decodes and re-encodes a fixture fed in small pieces, line by line', () => {
    const text = readFixture('approval-composer.jsonl');
    const splitter = new JsonlLineSplitter();
    const decoder = new JsonlDecoder();
    let encoder: JsonlEncoder | undefined;
    const out: string[] = [];
    const feed = (lines: string[]): void => {
      for (const line of lines) {
        const events = decoder.push(line);
        if (encoder === undefined && decoder.header !== undefined) {
          encoder = new JsonlEncoder(decoder.header);
          out.push(encoder.headerLine());
        }
        for (const e of events) out.push(...(encoder as JsonlEncoder).push(e as unknown as SessionEvent));
      }
    };
    for (let i = 0; i < text.length; i += 997) feed(splitter.push(text.slice(i, i + 997)));
    feed(splitter.end());
    out.push(...(encoder as JsonlEncoder).end());
    expect(out.map((l) => l + '\n').join('')).toBe(text);
  });
});

describe('JSONL packing rules', () => {
  const chunk = (seq: number, time: number, c: Record<string, Json>, extra: Partial<SessionEvent> = {}): SessionEvent => ({
    type: 'assistant/chunk',
    seq,
    time,
    data: { turn: 1, step: 1, chunk: c },
    ...extra,
  });
  const text = (index: number, t: string): Record<string, Json> => ({ type: 'text-delta', index, text: t });
  const lines = (events: SessionEvent[]): Json[] =>
    encodeJsonl(HEADER, events)
      .split('\n')
      .slice(1, -1)
      .map((l) => JSON.parse(l) as Json);

  it('packs runs of 3 but not of 2', () => {
    expect(lines([chunk(0, 1, text(0, 'a')), chunk(1, 2, text(0, 'b'))])).toHaveLength(2);
    expect(lines([chunk(0, 1, text(0, 'a')), chunk(1, 2, text(0, 'b')), chunk(2, 2, text(0, 'c'))])).toStrictEqual([
      { type: 'text-chunks', seq0: 0, time0: 1, data: { turn: 1, step: 1, index: 0, dt: [1, 0], texts: ['a', 'b', 'c'] } },
    ]);
  });

  it('breaks runs at a different block, a seq gap, a surface field, ignorable or extra keys', () => {
    const base = [chunk(0, 1, text(0, 'a')), chunk(1, 1, text(0, 'b')), chunk(2, 1, text(0, 'c'))];
    expect(lines([...base.slice(0, 2), chunk(2, 1, text(1, 'c'))])).toHaveLength(3);
    expect(lines([...base.slice(0, 2), chunk(3, 1, text(0, 'c'))])).toHaveLength(3);
    expect(lines([...base.slice(0, 2), chunk(2, 1, text(0, 'c'), { ignorable: true })])).toHaveLength(3);
    expect(lines([...base.slice(0, 2), chunk(2, 1, { ...text(0, 'c'), extra: 1 })])).toHaveLength(3);
    expect(lines([...base.slice(0, 2), chunk(2, 1, { type: 'reasoning-delta', index: 0, text: 'c' })])).toHaveLength(3);
    const extraData: SessionEvent = { type: 'assistant/chunk', seq: 2, time: 1, data: { turn: 1, step: 1, chunk: text(0, 'c'), x: 1 } };
    expect(lines([...base.slice(0, 2), extraData])).toHaveLength(3);
  });

  it('packs tool-call deltas only when id and name agree across the run', () => {
    const tc = (seq: number, name?: string): SessionEvent =>
      chunk(seq, 1, { type: 'tool-call-delta', index: 0, id: 'c', ...(name === undefined ? {} : { name }), argumentsDelta: String(seq) });
    expect(lines([tc(0, 'bash'), tc(1, 'bash'), tc(2, 'bash')])).toHaveLength(1);
    expect(lines([tc(0), tc(1), tc(2)])).toStrictEqual([
      { type: 'tool-call-chunks', seq0: 0, time0: 1, data: { turn: 1, step: 1, index: 0, dt: [0, 0], id: 'c', args: ['0', '1', '2'] } },
    ]);
    expect(lines([tc(0, 'bash'), tc(1), tc(2)])).toHaveLength(3);
    expect(lines([tc(0, 'bash'), tc(1, 'bash'), tc(2, 'sh')])).toHaveLength(3);
  });

  it('with packChunks:false writes one line per event', () => {
    const evs = [chunk(0, 1, text(0, 'a')), chunk(1, 2, text(0, 'b')), chunk(2, 2, text(0, 'c'))];
    expect(encodeJsonl(HEADER, evs, { packChunks: false }).split('\n')).toHaveLength(5);
  });

  it('property: export then import reproduces any log of chunk runs and other events exactly', () => {
    const deltaChunk = fc.oneof(
      fc.record({ type: fc.constantFrom('text-delta', 'reasoning-delta'), index: fc.integer({ min: 0, max: 2 }), text: fc.string({ maxLength: 3 }) }),
      fc.record(
        {
          type: fc.constant('tool-call-delta'),
          index: fc.integer({ min: 0, max: 2 }),
          id: fc.constantFrom('c1', 'c2'),
          name: fc.constantFrom('bash', 'read'),
          argumentsDelta: fc.string({ maxLength: 3 }),
        },
        { requiredKeys: ['type', 'index', 'id', 'argumentsDelta'] },
      ),
    );
    const item = fc.oneof(
      // a run of identical-block chunks (most likely packable)
      fc.tuple(deltaChunk, fc.integer({ min: 1, max: 6 }), fc.array(fc.integer({ min: -5, max: 50 }), { minLength: 6, maxLength: 6 })).map(
        ([c, n, dts]) => ({ kind: 'run' as const, c, n, dts }),
      ),
      fc.record({ kind: fc.constant('other' as const), type: fc.constantFrom('turn/start', 'step/end', 'assistant/chunk'), surface: fc.boolean() }),
      fc.record({ kind: fc.constant('gap' as const), by: fc.integer({ min: 1, max: 3 }) }),
    );
    fc.assert(
      fc.property(fc.array(item, { maxLength: 12 }), fc.integer({ min: 0, max: 2_000_000_000_000 }), (items, t0) => {
        const events: SessionEvent[] = [];
        let seq = 0;
        let time = t0;
        for (const it of items) {
          if (it.kind === 'gap') {
            seq += it.by;
            continue;
          }
          if (it.kind === 'other') {
            events.push({
              type: it.type,
              seq: seq++,
              time,
              data: it.type === 'assistant/chunk' ? { turn: 1, step: 1, chunk: { type: 'usage', usage: {} } } : { turn: 1 },
              ...(it.surface && it.type === 'assistant/chunk' ? { ignorable: true as const } : {}),
            });
            continue;
          }
          for (let k = 0; k < it.n; k++) {
            time += it.dts[k] ?? 0;
            events.push({ type: 'assistant/chunk', seq: seq++, time, data: { turn: 1, step: 2, chunk: { ...it.c, ...pickPayload(it.c, k) } } });
          }
        }
        const clean = events.map(stripUndefined);
        const text = encodeJsonl(HEADER, clean);
        const back = decodeJsonl(text);
        expect(back.header).toStrictEqual(HEADER);
        expect(back.events).toStrictEqual(clean);
        // the logs are valid: the engine accepts the imported events unchanged
        const plan = SessionEngine.create().plan(back.events, { mode: 'import', now: () => 0, sessionId: 's1', lookup: () => undefined, allowSeqGaps: true });
        expect(plan.events).toStrictEqual(clean);
        expect(encodeJsonl(back.header, back.events as unknown as SessionEvent[])).toBe(text);
      }),
      { numRuns: 300 },
    );
  });
});

function pickPayload(c: Record<string, unknown>, k: number): Record<string, unknown> {
  // vary the payload within a run so packing has to keep member order
  return c['type'] === 'tool-call-delta' ? { argumentsDelta: `${String(c['argumentsDelta'])}${k}` } : { text: `${String(c['text'])}${k}` };
}

function stripUndefined<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}
