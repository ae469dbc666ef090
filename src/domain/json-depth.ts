/**
 * The nesting limit of event data, shared by every way data enters (AppendEvents in either data
 * form, ImportSession), so that anything accepted can be exported and imported again. Deeper data
 * is refused as DATA_TOO_DEEP before anything recursive (lossless-JSON checks, JSON.stringify)
 * touches it: those would otherwise overflow the stack and surface as INTERNAL.
 */

/** Deepest JSON nesting accepted in event data (deeper data is DATA_TOO_DEEP). */
export const MAX_JSON_DEPTH = 200;

/** Nesting depth of JSON text, counted without parsing (strings skipped). */
export function jsonTextDepth(text: string): number {
  return jsonTextInfo(text).depth;
}

/** What {@link jsonTextInfo} found in one pass over JSON text. */
export interface JsonTextInfo {
  /** Nesting depth (as jsonTextDepth). */
  readonly depth: number;
  /**
   * True when the text has nothing JSON.stringify would write differently for the parsed value:
   * no whitespace outside strings, no `\/` or `\u` escapes, only integers of at most 15 digits.
   * (Duplicate and integer-like keys, which JSON.parse folds or reorders, are caught by comparing
   * `members` with the parsed value: see adoptParsedJson in domain/json.ts.)
   */
  readonly canonical: boolean;
  /** Name/value pairs (colons outside strings). */
  readonly members: number;
}

/**
 * Depth, canonical form and member count of JSON text in one pass, without parsing (the text is
 * assumed valid JSON; invalid text gives meaningless results). Strings are skipped with indexOf
 * (the engine's memchr-like search) from quote to quote and from backslash to backslash, not
 * character by character: event data is mostly string content.
 */
export function jsonTextInfo(text: string): JsonTextInfo {
  const n = text.length;
  let depth = 0, max = 0, members = 0, digits = 0;
  let canonical = true;
  // The first backslash at or after the current string's start (-1: none left in the text).
  let backslash = text.indexOf('\\');
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 34 /* " */) {
      digits = 0;
      if (backslash !== -1 && backslash <= i) backslash = text.indexOf('\\', i + 1);
      // The closing quote is the next quote not covered by an escape (\").
      let close = text.indexOf('"', i + 1);
      if (close === -1) close = n;
      while (backslash !== -1 && backslash < close) {
        // Only the two-character escapes JSON.stringify writes are canonical.
        const e = text.charCodeAt(backslash + 1);
        if (e === 117 /* u */ || e === 47 /* / */) canonical = false;
        const after = backslash + 2;
        backslash = after < n ? text.indexOf('\\', after) : -1;
        if (after > close) {
          close = text.indexOf('"', after);
          if (close === -1) close = n;
        }
      }
      i = close;
    } else if (c >= 48 && c <= 57) {
      if (++digits > 15) canonical = false;
    } else {
      digits = 0;
      if (c === 91 || c === 123) {
        if (++depth > max) max = depth;
      } else if (c === 93 || c === 125) depth--;
      else if (c === 58 /* : */) members++;
      else if (c === 32 || c === 10 || c === 13 || c === 9 || c === 46 /* . */ || c === 101 /* e */ || c === 69 /* E */ || c === 43 /* + */) {
        // Whitespace, fractions and exponents: JSON.stringify may write these differently. The
        // 'e' of true/false is caught here too, which only costs the fast path for booleans.
        if (c !== 101 || !inLiteral(text, i)) canonical = false;
      }
    }
  }
  return { depth: max, canonical, members };
}

/** True when the 'e' at `i` ends `true` or `false` (not a number exponent). */
function inLiteral(text: string, i: number): boolean {
  const p = text.charCodeAt(i - 1);
  return p === 117 /* u of true */ || p === 115 /* s of false */;
}
