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
  let depth = 0, max = 0, inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* \ */) i++;
      else if (c === 34 /* " */) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 91 || c === 123) { if (++depth > max) max = depth; }
    else if (c === 93 || c === 125) depth--;
  }
  return max;
}
