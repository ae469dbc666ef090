/**
 * The reference semantics of a query's field conditions (issue #40), which every store compiles
 * to its own SQL: positive `type:`, `tool:` and `session:` values are ORed within their field;
 * every `label:` condition must hold; each negated item excludes what it names; different fields
 * are ANDed.
 */
import type { SearchField, SearchFieldName } from './search-query.js';

/** What the fields of a query look at for one event. */
export interface FieldSubject {
  readonly type: string;
  /** The tools the event calls or answers. */
  readonly tools: readonly string[];
  /** The session's storage key (the query's `session:` values are storage keys by now). */
  readonly sessionId: string;
  readonly labels: Readonly<Record<string, string>>;
}

function holds(f: SearchField, s: FieldSubject): boolean {
  switch (f.field) {
    case 'type':
      return s.type === f.value;
    case 'tool':
      return s.tools.includes(f.value);
    case 'session':
      return s.sessionId === f.value;
    case 'label':
      return Object.prototype.hasOwnProperty.call(s.labels, f.labelKey!) && s.labels[f.labelKey!] === f.value;
  }
}

/** True when the event satisfies every field condition. */
export function fieldsMatch(fields: readonly SearchField[], s: FieldSubject): boolean {
  const anyOf = new Map<SearchFieldName, boolean>();
  for (const f of fields) {
    const ok = holds(f, s);
    if (f.negated) {
      if (ok) return false;
    } else if (f.field === 'label') {
      if (!ok) return false;
    } else anyOf.set(f.field, (anyOf.get(f.field) ?? false) || ok);
  }
  for (const ok of anyOf.values()) if (!ok) return false;
  return true;
}

/** The positive values of one ORed field (type, tool, session), or undefined when the query has none. */
export function positiveValues(fields: readonly SearchField[], field: 'type' | 'tool' | 'session'): string[] | undefined {
  const values = fields.filter((f) => f.field === field && !f.negated).map((f) => f.value);
  return values.length === 0 ? undefined : values;
}
