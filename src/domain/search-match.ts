/**
 * The reference semantics of a query's text terms over a searchable text (issue #40), and the
 * snippet every store's hits are shown with. The memory store matches with this code; the SQLite
 * and PostgreSQL compilations must find the same events (the contract suite checks it).
 *
 * A term matches a text when its tokens occur consecutively among the text's tokens (the last one
 * as a prefix for a prefix term). An event matches when every positive term matches and no
 * negated term does.
 */
import { searchTokenSpans, type SearchTerm, type TokenSpan } from './search-query.js';

/** The token index where `term` first matches from `from`, or -1. */
function findTerm(term: SearchTerm, tokens: readonly TokenSpan[], from = 0): number {
  const n = term.tokens.length;
  outer: for (let i = from; i + n <= tokens.length; i++) {
    for (let k = 0; k < n; k++) {
      const t = tokens[i + k]!.token;
      const want = term.tokens[k]!;
      const ok = term.prefix && k === n - 1 ? t.startsWith(want) : t === want;
      if (!ok) continue outer;
    }
    return i;
  }
  return -1;
}

/** True when the text's tokens satisfy every term (see the module comment). */
export function termsMatch(terms: readonly SearchTerm[], tokens: readonly TokenSpan[]): boolean {
  for (const t of terms) if ((findTerm(t, tokens) >= 0) === t.negated) return false;
  return true;
}

/** A match inside a snippet: [start, end) in Unicode code points of the snippet. */
export interface SnippetRange {
  readonly start: number;
  readonly end: number;
}

/** A snippet of a hit's text with the matched terms' ranges. */
export interface Snippet {
  readonly text: string;
  readonly ranges: readonly SnippetRange[];
}

/** Code units of text shown before the first match in a snippet. */
export const SNIPPET_BEFORE = 60;
/** Longest snippet, in UTF-16 code units (before the "…" marks). */
export const SNIPPET_LENGTH = 200;

function codePoints(s: string, from: number, to: number): number {
  let n = 0;
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    if (!(c >= 0xdc00 && c <= 0xdfff && i > from)) n++;
  }
  return n;
}

/** Moves an offset off the middle of a surrogate pair. */
function unsplit(s: string, i: number): number {
  const c = s.charCodeAt(i);
  return i > 0 && i < s.length && c >= 0xdc00 && c <= 0xdfff ? i - 1 : i;
}

/**
 * The snippet of `text` for the positive terms: a window of at most SNIPPET_LENGTH code units
 * starting SNIPPET_BEFORE before the first match (the text's start when nothing matches, e.g. a
 * fields-only query), "…" where it was cut, newlines shown as spaces, and the ranges of every
 * positive term match inside it.
 */
export function searchSnippet(text: string, terms: readonly SearchTerm[]): Snippet {
  const tokens = searchTokenSpans(text);
  const spans: { start: number; end: number }[] = [];
  for (const t of terms) {
    if (t.negated) continue;
    for (let i = findTerm(t, tokens); i >= 0; i = findTerm(t, tokens, i + 1)) {
      spans.push({ start: tokens[i]!.start, end: tokens[i + t.tokens.length - 1]!.end });
    }
  }
  spans.sort((a, b) => a.start - b.start || b.end - a.end);
  const first = spans[0]?.start ?? 0;
  const from = unsplit(text, Math.max(0, first - SNIPPET_BEFORE));
  const to = unsplit(text, Math.min(text.length, from + SNIPPET_LENGTH));
  const lead = from > 0 ? '…' : '';
  const body = text.slice(from, to).replace(/[\r\n\t]/g, ' ');
  const ranges: SnippetRange[] = [];
  let covered = -1;
  for (const s of spans) {
    if (s.start < covered || s.start >= to) continue;
    const end = Math.min(s.end, to);
    const start = codePoints(text, from, s.start) + lead.length;
    ranges.push({ start, end: start + codePoints(text, s.start, end) });
    covered = end;
  }
  return { text: lead + body + (to < text.length ? '…' : ''), ranges };
}
