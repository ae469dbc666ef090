import { describe, expect, it } from 'vitest';
import type { Json } from '../../src/domain/event.js';
import { parseSearchQuery, searchTokenSpans } from '../../src/domain/search-query.js';
import { searchSnippet, termsMatch } from '../../src/domain/search-match.js';
import { cachedKeyOrders, compareJsonbKeys, MAX_SEARCH_TEXT, searchResultCallId, searchText, searchToolCalls } from '../../src/domain/search-text.js';
import { fieldsMatch } from '../../src/domain/search-fields.js';

const assistant: Json = {
  turn: 1, step: 1,
  message: {
    id: 'm1', role: 'assistant', source: { kind: 'model', provider: 'p', model: 'secret-model' },
    content: [
      { type: 'reasoning', text: 'I should clean up' },
      { type: 'text', text: 'Running it now.' },
      { type: 'tool-call', id: 'c1', name: 'bash', arguments: '{"command":"rm -rf /tmp/x"}' },
    ],
  },
  usage: { inputTokens: 5, outputTokens: 7 },
};
const result: Json = {
  turn: 1, step: 1,
  message: { id: 'r1', role: 'user', source: { kind: 'tool', callId: 'c1' }, content: [{ type: 'tool-result', toolCallId: 'c1', content: [{ type: 'text', text: 'removed 3 files' }], isError: true }] },
  error: { name: 'ExitError', code: 'E1' },
  meta: { display: 'not searchable' },
};

describe('searchable text', () => {
  it('takes text, reasoning, tool names and arguments, tool-result text and errors; skips ids, roles, sources, meta, usage', () => {
    expect(searchText('assistant/message', assistant)).toBe('I should clean up\nRunning it now.\nbash\n{"command":"rm -rf /tmp/x"}');
    expect(searchText('tool/result', result)).toBe('E1\nExitError\nremoved 3 files');
    expect(searchText('user/message', { id: 'u', role: 'user', source: { kind: 'user' }, content: [{ type: 'text', text: 'invoice 4711' }] })).toBe('invoice 4711');
  });

  it('reads legacy shapes by the same rule and leaves other types out', () => {
    expect(searchText('assistant/message', { turn: 1, step: 1, content: [{ type: 'text', text: 'old' }], provenance: { provider: 'x', model: 'y' } })).toBe('old');
    expect(searchText('tool/result', { turn: 1, step: 1, callId: 'c9', content: [{ type: 'text', text: 'out' }], isError: false })).toBe('out');
    expect(searchText('turn/start', { turn: 1 })).toBeUndefined();
    expect(searchText('tool/call', { turn: 1, step: 1, callId: 'c', name: 'bash', arguments: '{}' })).toBeUndefined();
  });

  it('orders object keys as jsonb does: by UTF-8 length, then bytes', () => {
    expect(['bb', 'a', 'é', 'ab', 'z'].sort(compareJsonbKeys)).toEqual(['a', 'z', 'ab', 'bb', 'é']);
    expect(searchText('user/message', { content: [{ zz: 'second', b: 'first', type: 'x' }], source: { kind: 'user' } })).toBe('first\nsecond');
  });

  it('orders every object by its own keys whatever shapes came before (the key orders are cached per key list)', () => {
    const texts = (o: Json): string | undefined => searchText('user/message', { content: [o] });
    expect(texts({ bb: '2', a: '1', id: 'skipped' })).toBe('1\n2');
    expect(texts({ id: 'skipped', a: '1', bb: '2' })).toBe('1\n2');
    expect(texts({ a: '1', bb: '2' })).toBe('1\n2');
    // Key lists whose joined text is the same are other shapes.
    expect(texts({ 'a,b': 'x', c: 'y' })).toBe('y\nx');
    expect(texts({ a: 'p', 'b,c': 'q' })).toBe('p\nq');
    expect(texts({ é: 'u', ab: 'v', id: 'w' })).toBe('v\nu');
    expect(texts({ type: 'only skipped' })).toBe('');
    expect(texts({ one: 'single' })).toBe('single');
  });

  it('caches the order of short key lists only: an object with many or long keys is ordered, never kept', () => {
    const texts = (o: Json): string | undefined => searchText('user/message', { content: [o] });
    const many: Record<string, string> = {};
    for (let i = 9999; i >= 0; i--) many[`k${i}`] = i === 0 ? 'first' : i === 9999 ? 'last' : '';
    const long = { ['x'.repeat(2000)]: 'b', y: 'a' };
    const before = cachedKeyOrders();
    expect(texts(many)!.split('\n').filter(Boolean)).toEqual(['first', 'last']);
    expect(texts(long)).toBe('a\nb');
    expect(cachedKeyOrders()).toBe(before);
    expect(texts({ shortA: '1', shortB: '2', shortC: '3' })).toBe('1\n2\n3');
    expect(cachedKeyOrders()).toBe(before + 1);
  });

  it('cuts the text at MAX_SEARCH_TEXT code points, never inside a surrogate pair', () => {
    const big = '😀'.repeat(MAX_SEARCH_TEXT + 5);
    const t = searchText('user/message', { content: [{ type: 'text', text: big }] })!;
    expect([...t]).toHaveLength(MAX_SEARCH_TEXT);
    expect(t.at(-1)).toBe('\ude00');
  });

  it('stops gathering strings once it holds MAX_SEARCH_TEXT code points: the text is the cut of all of them, astral or not', () => {
    for (const ch of ['a', '😀']) {
      const part = ch.repeat(1000);
      const parts = Array.from({ length: 400 }, (_, i) => `${i}${part}`);
      const t = searchText('user/message', { content: parts.map((text) => ({ type: 'text', text })) })!;
      expect([...t]).toHaveLength(MAX_SEARCH_TEXT);
      expect(t).toBe([...parts.join('\n')].slice(0, MAX_SEARCH_TEXT).join(''));
    }
    // A later string past the cut is not visited: a getter there would throw.
    const content: unknown[] = [{ type: 'text', text: 'x'.repeat(2 * MAX_SEARCH_TEXT) }];
    Object.defineProperty(content, 1, { enumerable: true, get: () => { throw new Error('read past the cut'); } });
    expect(searchText('user/message', { content } as never, '{}')).toHaveLength(MAX_SEARCH_TEXT);
  });

  it('indexes an event whose JSON holds a NUL or a lone surrogate with empty text', () => {
    expect(searchText('user/message', { content: [{ type: 'text', text: 'a\u0000b' }] })).toBe('');
    expect(searchText('user/message', { content: [{ type: 'text', text: 'a\ud800b' }] })).toBe('');
    expect(searchText('user/message', { content: [{ type: 'text', text: 'a😀b \\u0000' }] })).toBe('');
    expect(searchText('user/message', { content: [{ type: 'text', text: 'a😀b' }] })).toBe('a😀b');
  });

  it('finds tool calls and the call a result answers', () => {
    expect(searchToolCalls('assistant/message', assistant)).toEqual([['c1', 'bash']]);
    expect(searchToolCalls('assistant/message', { content: [{ type: 'tool-call', id: 'c2', name: 'deploy', arguments: '{}' }], provenance: {} })).toEqual([['c2', 'deploy']]);
    expect(searchToolCalls('user/message', assistant)).toEqual([]);
    expect(searchResultCallId('tool/result', result)).toBe('c1');
    expect(searchResultCallId('tool/result', { callId: 'c9', content: [], isError: false })).toBe('c9');
    expect(searchResultCallId('assistant/message', result)).toBeUndefined();
  });
});

describe('matching and snippets', () => {
  const text = searchText('assistant/message', assistant)!;
  const match = (q: string): boolean => termsMatch(parseSearchQuery(q).terms, searchTokenSpans(text));

  it('matches words, phrases in order, prefixes; exclusions exclude', () => {
    expect(match('clean')).toBe(true);
    expect(match('"rm -rf"')).toBe(true);
    expect(match('rm-rf')).toBe(true);
    expect(match('"rf rm"')).toBe(false);
    expect(match('runn*')).toBe(true);
    expect(match('"clean u"*')).toBe(true);
    expect(match('"clean u"')).toBe(false);
    expect(match('clean -bash')).toBe(false);
    expect(match('clean -deploy')).toBe(true);
    expect(match('RUNNING')).toBe(true);
  });

  it('marks every match in a window around the first, in code points', () => {
    const s = searchSnippet('😀 find the needle here, and another needle', parseSearchQuery('needle').terms);
    expect(s.text).toBe('😀 find the needle here, and another needle');
    expect(s.ranges).toEqual([{ start: 11, end: 17 }, { start: 36, end: 42 }]);
    const long = `${'x '.repeat(100)}needle ${'y '.repeat(200)}`;
    const cut = searchSnippet(long, parseSearchQuery('needle').terms);
    expect(cut.text.startsWith('…')).toBe(true);
    expect(cut.text.endsWith('…')).toBe(true);
    const r = cut.ranges[0]!;
    expect([...cut.text].slice(r.start, r.end).join('')).toBe('needle');
  });

  it('fields: ORed within type/tool/session, every label, negations exclude', () => {
    const subject = { type: 'tool/result', tools: ['deploy'], sessionId: 's1', labels: { team: 'a', env: 'prod' } };
    const f = (q: string): boolean => fieldsMatch(parseSearchQuery(q).fields, subject);
    expect(f('type:user/message type:tool/result')).toBe(true);
    expect(f('type:user/message')).toBe(false);
    expect(f('tool:deploy label:team=a label:env=prod')).toBe(true);
    expect(f('label:team=a label:env=dev')).toBe(false);
    expect(f('tool:deploy -session:s1')).toBe(false);
    expect(f('-label:team=b session:s1')).toBe(true);
  });
});
