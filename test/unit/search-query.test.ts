import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { DomainError } from '../../src/domain/errors.js';
import { MAX_QUERY_ITEMS, MAX_QUERY_LENGTH, parseSearchQuery, searchTokens } from '../../src/domain/search-query.js';

function refusal(q: string): DomainError {
  try {
    parseSearchQuery(q);
  } catch (e) {
    if (e instanceof DomainError) return e;
    throw e;
  }
  throw new Error(`${q} was accepted`);
}

describe('search query parser', () => {
  it('parses words, phrases, prefixes and exclusions into folded tokens', () => {
    const q = parseSearchQuery('Invoice "rm -rf" deplo* -Café');
    expect(q.terms).toEqual([
      { kind: 'term', tokens: ['invoice'], prefix: false, negated: false, position: 0 },
      { kind: 'term', tokens: ['rm', 'rf'], prefix: false, negated: false, position: 8 },
      { kind: 'term', tokens: ['deplo'], prefix: true, negated: false, position: 17 },
      { kind: 'term', tokens: ['cafe'], prefix: false, negated: true, position: 24 },
    ]);
    expect(q.fields).toEqual([]);
  });

  it('parses the four fields, negated and quoted values', () => {
    const q = parseSearchQuery('type:tool/result tool:deploy -label:team=a label:"k=v w" session:s1');
    expect(q.fields).toEqual([
      { kind: 'field', field: 'type', value: 'tool/result', negated: false, position: 0 },
      { kind: 'field', field: 'tool', value: 'deploy', negated: false, position: 17 },
      { kind: 'field', field: 'label', labelKey: 'team', value: 'a', negated: true, position: 29 },
      { kind: 'field', field: 'label', labelKey: 'k', value: 'v w', negated: false, position: 43 },
      { kind: 'field', field: 'session', value: 's1', negated: false, position: 57 },
    ]);
    expect(q.terms).toEqual([]);
  });

  it('treats a word with an unknown field name as text and "" inside quotes as a quote', () => {
    expect(parseSearchQuery('https://x.dev/a').terms[0]!.tokens).toEqual(['https', 'x', 'dev', 'a']);
    expect(parseSearchQuery('"say ""hi"""').terms[0]!.tokens).toEqual(['say', 'hi']);
  });

  it.each([
    ['', 0, 'empty'],
    ['   ', 0, 'empty'],
    ['foo "bar', 4, 'unterminated quote'],
    ['foo - bar', 4, '"-" must be followed'],
    ['foo -', 4, '"-" must be followed'],
    ['fo*o', 2, '"*" is only allowed at the end'],
    ['***', 0, '"*" is only allowed at the end'],
    ['a type:', 7, 'type: needs a value'],
    ['label:team', 6, 'label: needs key=value'],
    ['label:=x', 6, 'label: needs key=value'],
    ['!!! x', 0, 'at least one letter or digit'],
    ['"" x', 0, 'at least one letter or digit'],
    ['"a"b', 3, 'expected a space after the closing quote'],
    ['a"b"', 1, 'a quote inside a word'],
    ['-foo -"bar baz"', 0, 'exclusions only'],
  ])('refuses %j at position %i', (q, position, what) => {
    const e = refusal(q);
    expect(e.reason).toBe('SEARCH_QUERY_INVALID');
    expect(e.metadata['position']).toBe(String(position));
    expect(e.message).toContain(what);
    expect(e.message).toContain(`position ${position}`);
  });

  it('refuses queries over the limits', () => {
    expect(refusal('a'.repeat(MAX_QUERY_LENGTH + 1)).metadata['position']).toBe(String(MAX_QUERY_LENGTH));
    const many = Array.from({ length: MAX_QUERY_ITEMS + 1 }, (_, i) => `w${i}`).join(' ');
    expect(refusal(many).message).toContain(`more than ${MAX_QUERY_ITEMS}`);
    expect(parseSearchQuery(many.split(' ').slice(0, MAX_QUERY_ITEMS).join(' ')).terms).toHaveLength(MAX_QUERY_ITEMS);
  });

  it('keeps FTS5 and tsquery syntax out of terms: tokens are letters and digits only', () => {
    const q = parseSearchQuery(`"a" OR b NEAR(c d) x:* 'e':* f&!g|h<->i ^j {k} col:l NOT m "x"" AND ""y"`);
    expect(q.terms.map((t) => t.tokens.join(' '))).toEqual(['a', 'or', 'b', 'near c', 'd', 'x', 'e', 'f g h i', 'j', 'k', 'col l', 'not', 'm', 'x and y']);
    for (const t of q.terms) for (const tok of t.tokens) expect(tok).toMatch(/^[\p{L}\p{N}\p{Co}]+$/u);
  });

  it('never throws anything but SEARCH_QUERY_INVALID, and every token is letters and digits (hostile input)', () => {
    fc.assert(fc.property(fc.string({ unit: 'binary', maxLength: 80 }), (s) => {
      try {
        const q = parseSearchQuery(s);
        for (const t of q.terms) {
          expect(t.tokens.length).toBeGreaterThan(0);
          for (const tok of t.tokens) expect(tok).toMatch(/^[\p{L}\p{N}\p{Co}]+$/u);
        }
      } catch (e) {
        expect(e).toBeInstanceOf(DomainError);
        expect((e as DomainError).reason).toBe('SEARCH_QUERY_INVALID');
        const p = Number((e as DomainError).metadata['position']);
        expect(p).toBeGreaterThanOrEqual(0);
        expect(p).toBeLessThanOrEqual(s.length);
      }
    }), { numRuns: 300 });
  });

  it('folds case and diacritics, splits on everything but letters and digits', () => {
    expect(searchTokens('Crème BRÛLÉE, rm -rf /tmp; invoice#4711 naïve_x')).toEqual(['creme', 'brulee', 'rm', 'rf', 'tmp', 'invoice', '4711', 'naive', 'x']);
  });
});
