/**
 * The search query language (issue #40), parsed once here for every store: the parser's output
 * is a store-neutral AST that each store compiles (SQLite: an FTS5 MATCH string whose every term
 * is a quoted phrase of tokens; PostgreSQL: a tsquery built from lexemes; memory: a scan). User
 * text never reaches a store's query syntax raw: a term becomes the *tokens* of
 * {@link searchTokens} (letters and digits only), so no FTS5 or tsquery operator can come in.
 *
 * Syntax (whitespace separates items; everything is case-insensitive):
 *
 * | item | meaning |
 * |---|---|
 * | `word` | the token(s) of the word (`rm-rf` is the phrase `rm rf`) |
 * | `"two words"` | the phrase: the tokens next to each other, in order |
 * | `foo*` / `"foo ba"*` | prefix: the last token is a prefix |
 * | `-word`, `-"a phrase"`, `-type:x` | exclude events matching the item |
 * | `type:T` | the event type is T (e.g. `type:tool/result`) |
 * | `tool:NAME` | the event calls tool NAME or is the result of a call to it |
 * | `label:k=v` | the session has label k with value v |
 * | `session:ID` | the event is in session ID |
 *
 * Terms are ANDed. Repeated positive items of one field are ORed (`type:a type:b`), different
 * fields ANDed. A field value may be quoted (`label:"team=a b"`). A word with a colon whose prefix
 * is not one of the four field names is an ordinary word (`https://x.dev` is a phrase).
 */
import { DomainError } from './errors.js';

/** Reason of a query the parser refuses (INVALID_ARGUMENT); metadata `position` is the 0-based character offset. */
export const SEARCH_QUERY_INVALID = 'SEARCH_QUERY_INVALID';

/** Longest query accepted, in UTF-16 code units. */
export const MAX_QUERY_LENGTH = 1024;
/** Most items (terms and fields) in one query. */
export const MAX_QUERY_ITEMS = 32;

/** A text term: one token, a phrase of tokens, optionally a prefix on its last token. */
export interface SearchTerm {
  readonly kind: 'term';
  /** Folded tokens (see searchTokens), at least one. */
  readonly tokens: readonly string[];
  /** The last token is a prefix. */
  readonly prefix: boolean;
  readonly negated: boolean;
  /** Offset of the item in the query. */
  readonly position: number;
}

/** The field names of the language. */
export type SearchFieldName = 'type' | 'tool' | 'label' | 'session';

/** A field condition. */
export interface SearchField {
  readonly kind: 'field';
  readonly field: SearchFieldName;
  /** The value (for `label`, the label's value). */
  readonly value: string;
  /** For `label`, the label's key. */
  readonly labelKey?: string;
  readonly negated: boolean;
  readonly position: number;
}

/** A parsed query: text terms and field conditions, all of which must hold. */
export interface SearchQuery {
  readonly terms: readonly SearchTerm[];
  readonly fields: readonly SearchField[];
}

const FIELD_NAMES: ReadonlySet<string> = new Set(['type', 'tool', 'label', 'session']);

/** A token with its place in the text it came from (UTF-16 offsets, end exclusive). */
export interface TokenSpan {
  readonly token: string;
  readonly start: number;
  readonly end: number;
}

const TOKEN_RE = /[\p{L}\p{N}\p{Co}]+/gu;
const MARKS_RE = /\p{M}/gu;

/** A token folded as the stores index it: diacritics removed, lower case. */
export function foldToken(raw: string): string {
  return raw.toLowerCase().normalize('NFD').replace(MARKS_RE, '');
}

/**
 * The tokens of a text, as all three stores split it (FTS5 unicode61's default token characters):
 * maximal runs of letters, digits and private-use characters (categories L*, N*, Co), folded with
 * {@link foldToken}. Every other character (space, punctuation, symbols, combining marks not
 * precomposed) separates tokens. A run that folds to nothing is dropped.
 */
export function searchTokenSpans(text: string): TokenSpan[] {
  const out: TokenSpan[] = [];
  for (const m of text.matchAll(TOKEN_RE)) {
    const token = foldToken(m[0]);
    if (token !== '') out.push({ token, start: m.index, end: m.index + m[0].length });
  }
  return out;
}

/** The folded tokens of a text (see {@link searchTokenSpans}). */
export function searchTokens(text: string): string[] {
  return searchTokenSpans(text).map((s) => s.token);
}

function invalid(position: number, what: string): DomainError {
  return new DomainError(SEARCH_QUERY_INVALID, `search query: ${what} at position ${position}`, { field: 'query', position: String(position) });
}

function isSpace(c: string): boolean {
  return c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\f' || c === '\v' || c === '\u00a0' || c === '\u3000';
}

/** A quoted string from `i` (at the quote); returns its text (with `""` inside for a quote) and the offset after it. */
function readQuoted(q: string, i: number): { text: string; end: number } {
  let text = '';
  let j = i + 1;
  for (;;) {
    if (j >= q.length) throw invalid(i, 'unterminated quote (close it with ")');
    const c = q[j]!;
    if (c === '"') {
      if (q[j + 1] === '"') {
        text += '"';
        j += 2;
        continue;
      }
      return { text, end: j + 1 };
    }
    text += c;
    j++;
  }
}

/** A bare word from `i`: up to whitespace, stopping at a quote. */
function readBare(q: string, i: number): { text: string; end: number } {
  let j = i;
  while (j < q.length && !isSpace(q[j]!) && q[j] !== '"') j++;
  return { text: q.slice(i, j), end: j };
}

function fieldOf(name: string, raw: string, negated: boolean, position: number, valuePosition: number): SearchField {
  const field = name as SearchFieldName;
  if (raw === '') throw invalid(valuePosition, `${name}: needs a value (e.g. ${name === 'label' ? 'label:team=search' : `${name}:VALUE`})`);
  if (field === 'label') {
    const eq = raw.indexOf('=');
    if (eq <= 0) throw invalid(valuePosition, 'label: needs key=value');
    return { kind: 'field', field, labelKey: raw.slice(0, eq), value: raw.slice(eq + 1), negated, position };
  }
  return { kind: 'field', field, value: raw, negated, position };
}

function termOf(text: string, prefix: boolean, negated: boolean, position: number): SearchTerm {
  const tokens = searchTokens(text);
  if (tokens.length === 0) throw invalid(position, 'a term needs at least one letter or digit');
  return { kind: 'term', tokens, prefix, negated, position };
}

/**
 * Parses a query (see the module comment). Throws DomainError SEARCH_QUERY_INVALID, with the
 * offending position in the message and in metadata `position`, for an empty query, an
 * unterminated quote, a dangling `-`, a `*` not at the end of a term, a field without a value,
 * `label:` without `key=`, a term without letters or digits, or a query over the limits.
 */
export function parseSearchQuery(q: string): SearchQuery {
  if (q.length > MAX_QUERY_LENGTH) throw invalid(MAX_QUERY_LENGTH, `the query is longer than ${MAX_QUERY_LENGTH} characters`);
  const terms: SearchTerm[] = [];
  const fields: SearchField[] = [];
  let i = 0;
  while (i < q.length) {
    if (isSpace(q[i]!)) {
      i++;
      continue;
    }
    const start = i;
    if (terms.length + fields.length >= MAX_QUERY_ITEMS) throw invalid(start, `more than ${MAX_QUERY_ITEMS} terms and fields`);
    let negated = false;
    if (q[i] === '-') {
      negated = true;
      i++;
      if (i >= q.length || isSpace(q[i]!)) throw invalid(start, '"-" must be followed by the term to exclude');
    }
    if (q[i] === '"') {
      const { text, end } = readQuoted(q, i);
      let prefix = false;
      let next = end;
      if (q[next] === '*') {
        prefix = true;
        next++;
      }
      if (next < q.length && !isSpace(q[next]!)) throw invalid(next, 'expected a space after the closing quote');
      terms.push(termOf(text, prefix, negated, start));
      i = next;
      continue;
    }
    const { text, end } = readBare(q, i);
    const colon = text.indexOf(':');
    const name = colon > 0 ? text.slice(0, colon).toLowerCase() : '';
    if (FIELD_NAMES.has(name)) {
      const valueAt = i + colon + 1;
      if (end === valueAt && q[end] === '"') {
        const quoted = readQuoted(q, end);
        if (quoted.end < q.length && !isSpace(q[quoted.end]!)) throw invalid(quoted.end, 'expected a space after the closing quote');
        fields.push(fieldOf(name, quoted.text, negated, start, valueAt));
        i = quoted.end;
      } else {
        if (end < q.length && q[end] === '"') throw invalid(end, 'a quote inside a field value (quote the whole value: field:"…")');
        fields.push(fieldOf(name, text.slice(colon + 1), negated, start, valueAt));
        i = end;
      }
      continue;
    }
    if (end < q.length && q[end] === '"') throw invalid(end, 'a quote inside a word (put a space before the phrase)');
    const prefix = text.endsWith('*');
    const body = prefix ? text.slice(0, -1) : text;
    const star = body.indexOf('*');
    if (star >= 0) throw invalid(i + star, '"*" is only allowed at the end of a term (prefix search)');
    terms.push(termOf(body, prefix, negated, start));
    i = end;
  }
  if (terms.length === 0 && fields.length === 0) throw invalid(0, 'the query is empty (give a word, a "phrase" or a field such as type:user/message)');
  if (!terms.some((t) => !t.negated) && !fields.some((f) => !f.negated)) {
    throw invalid(0, 'a query of exclusions only matches everything else; add a word, a phrase or a field to search for');
  }
  return { terms, fields };
}
