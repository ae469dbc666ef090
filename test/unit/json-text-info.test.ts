/**
 * jsonTextInfo (app/json-depth.ts) skips strings with indexOf, from quote to quote and backslash
 * to backslash. It must say exactly what a plain character-by-character scan says, on any text:
 * the oracle below is that scan (the implementation before the skip).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonTextDepth, jsonTextInfo, type JsonTextInfo } from '../../src/domain/json-depth.js';

function oracle(text: string): JsonTextInfo {
  let depth = 0, max = 0, members = 0, digits = 0;
  let canonical = true;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '"') {
      digits = 0;
      for (i++; i < text.length && text[i] !== '"'; i++) {
        if (text[i] === '\\') {
          const e = text[++i];
          if (e === 'u' || e === '/') canonical = false;
        }
      }
    } else if (c >= '0' && c <= '9') {
      if (++digits > 15) canonical = false;
    } else {
      digits = 0;
      if (c === '[' || c === '{') max = Math.max(max, ++depth);
      else if (c === ']' || c === '}') depth--;
      else if (c === ':') members++;
      else if (' \n\r\t.E+'.includes(c)) canonical = false;
      else if (c === 'e' && text[i - 1] !== 'u' && text[i - 1] !== 's') canonical = false;
    }
  }
  return { depth: max, canonical, members };
}

const TOKENS = ['"', '\\', '\\"', '\\\\', '\\\\"', '\\u0041', '\\/', '\\n', 'a', 'e', 'true', 'false', 'null', '1', '1234567890123456', ' ', '\n', ':', ',', '{', '}', '[', ']', '.', 'E', '+', '-', 'é', '😀'];

describe('jsonTextInfo', () => {
  it('agrees with a character-by-character scan on any text of JSON tokens, escapes and stray backslashes (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...TOKENS), { maxLength: 40 }), (tokens) => {
        const text = tokens.join('');
        expect(jsonTextInfo(text)).toEqual(oracle(text));
        expect(jsonTextDepth(text)).toBe(oracle(text).depth);
      }),
      { numRuns: 20_000 },
    );
  });

  it('agrees with it on JSON texts, compact, indented and with escaped slashes (property)', () => {
    const formats: Array<(v: unknown) => string> = [(v) => JSON.stringify(v), (v) => JSON.stringify(v, null, 1), (v) => JSON.stringify(v).replace(/\//g, '\\/')];
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), fc.integer({ min: 0, max: formats.length - 1 }), (value, f) => {
        const text = formats[f]!(value);
        expect(jsonTextInfo(text)).toEqual(oracle(text));
      }),
      { numRuns: 3_000 },
    );
  });

  it('finds the closing quote past escaped quotes and escaped backslashes', () => {
    expect(jsonTextInfo('{"a\\"{:":1}')).toEqual({ depth: 1, canonical: true, members: 1 });
    expect(jsonTextInfo('{"a\\\\":{"b":[1]}}')).toEqual({ depth: 3, canonical: true, members: 2 });
    expect(jsonTextInfo('["\\\\\\"]", {"x": 1}]')).toEqual({ depth: 2, canonical: false, members: 1 });
    expect(jsonTextInfo('{"a":"\\u0041","b":"c"}')).toEqual({ depth: 1, canonical: false, members: 2 });
    expect(jsonTextInfo('{"a":"\\/"}').canonical).toBe(false);
    expect(jsonTextInfo('{"a":"x\\ny","b":true,"c":false}')).toEqual({ depth: 1, canonical: true, members: 3 });
    // An unterminated string runs to the end of the text.
    expect(jsonTextInfo('{"a":"[[[')).toEqual({ depth: 1, canonical: true, members: 1 });
  });
});
