/**
 * The source text of the members of a JSON object text, without re-serializing anything: what a
 * client needs to send a value exactly as it read it (JSON.parse + JSON.stringify would turn
 * `1e400` into `null` and `-0` into `0`, which the server could then never refuse).
 */

function isWhitespace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function skipWhitespace(text: string, i: number): number {
  while (i < text.length && isWhitespace(text.charCodeAt(i))) i++;
  return i;
}

/** Index just past the string token starting at `i` (a `"`). */
function skipString(text: string, i: number): number {
  for (i++; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x5c /* \ */) i++;
    else if (c === 0x22 /* " */) return i + 1;
  }
  return i;
}

/** Index just past the value starting at `i`. */
function skipValue(text: string, i: number): number {
  const c = text.charCodeAt(i);
  if (c === 0x22) return skipString(text, i);
  if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
    let depth = 0;
    for (; i < text.length; i++) {
      const d = text.charCodeAt(i);
      if (d === 0x22) i = skipString(text, i) - 1;
      else if (d === 0x7b || d === 0x5b) depth++;
      else if (d === 0x7d || d === 0x5d) {
        depth--;
        if (depth === 0) return i + 1;
      }
    }
    return i;
  }
  // A number or a literal: up to the next delimiter.
  while (i < text.length) {
    const d = text.charCodeAt(i);
    if (d === 0x2c /* , */ || d === 0x7d || d === 0x5d || isWhitespace(d)) break;
    i++;
  }
  return i;
}

/**
 * The source text of each member value of the JSON object `text`, by key (the last occurrence of a
 * duplicated key, as JSON.parse keeps it). Keys are decoded (`"d\u0061ta"` is `data`).
 *
 * @param text - valid JSON text of an object (the caller parsed it successfully); anything else
 *   returns an empty map
 */
export function memberTexts(text: string): Map<string, string> {
  const out = new Map<string, string>();
  let i = skipWhitespace(text, 0);
  if (text.charCodeAt(i) !== 0x7b) return out;
  i = skipWhitespace(text, i + 1);
  while (i < text.length && text.charCodeAt(i) === 0x22) {
    const keyEnd = skipString(text, i);
    const key = JSON.parse(text.slice(i, keyEnd)) as string;
    i = skipWhitespace(text, keyEnd);
    i = skipWhitespace(text, i + 1); // the colon
    const valueEnd = skipValue(text, i);
    out.set(key, text.slice(i, valueEnd));
    i = skipWhitespace(text, valueEnd);
    if (text.charCodeAt(i) !== 0x2c) break;
    i = skipWhitespace(text, i + 1);
  }
  return out;
}
