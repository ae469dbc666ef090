/**
 * The session list's search box (issue #40 item 4): SearchEvents over every session the token
 * can read. Typing waits DEBOUNCE_MS, then asks for the first page and aborts the request still
 * in flight, so an answer never overwrites the results of a later query. Each hit links to its
 * session page at that seq (`/sessions/<id>?seq=<n>`), where the event is highlighted and scrolled
 * into view (seq-target.ts). The snippet's marks are code-point ranges; they become <mark>
 * elements around text nodes, so nothing the user or a model wrote is ever parsed as HTML. A
 * malformed query shows the server's message with the query and the character at its position
 * marked. Arrow keys move from the box through the hits; Esc clears the box.
 */
import type { SearchHit } from '../../gen/es/palimpsest/v1/service_pb.js';
import { api, failure, isCancel } from './api.js';
import { h, when } from './dom.js';

const DEBOUNCE_MS = 250;
const PAGE_SIZE = 20;

/** One piece of a snippet: matched text or the text between matches. */
export interface SnippetPart {
  readonly text: string;
  readonly match: boolean;
}

/** The snippet cut at its matches (code-point offsets; clamped, so the parts join back to it). */
export function snippetParts(snippet: string, matches: readonly { start: number; end: number }[]): SnippetPart[] {
  const points = [...snippet];
  const out: SnippetPart[] = [];
  let at = 0;
  for (const m of [...matches].sort((a, b) => a.start - b.start)) {
    const start = Math.max(at, Math.min(m.start, points.length));
    const end = Math.max(start, Math.min(m.end, points.length));
    if (start > at) out.push({ text: points.slice(at, start).join(''), match: false });
    if (end > start) out.push({ text: points.slice(start, end).join(''), match: true });
    at = end;
  }
  if (at < points.length) out.push({ text: points.slice(at).join(''), match: false });
  return out;
}

/** The link of a hit: its session page at its seq. */
export function hitHref(sessionId: string, seq: bigint | number): string {
  return `/sessions/${encodeURIComponent(sessionId)}?seq=${seq}`;
}

function hitRow(x: SearchHit): HTMLElement {
  return h('li', {},
    h('a', { class: 'search-hit', href: hitHref(x.sessionId, x.seq), 'data-link': true, 'data-session-id': x.sessionId, 'data-seq': String(x.seq) },
      h('span', { class: 'hit-where' },
        h('span', { class: 'mono hit-session' }, x.sessionId),
        h('span', { class: 'mono hit-seq' }, `#${x.seq}`),
        h('span', { class: 'mono hit-type' }, x.type),
        h('span', { class: 'hit-time', title: when(x.time) }, when(x.time))),
      h('span', { class: 'hit-snippet' }, ...snippetParts(x.snippet, x.matches).map((p) => (p.match ? h('mark', {}, p.text) : p.text)))));
}

/** The query with the character at `position` marked (a caret after the end when it is past it). */
function queryAt(query: string, position: number): HTMLElement {
  const at = Math.max(0, Math.min(position, query.length));
  const ch = query.slice(at, at + 1);
  return h('code', { class: 'query-at' }, query.slice(0, at), h('mark', { class: 'error-at', 'data-position': at }, ch === '' ? ' ' : ch), query.slice(at + 1));
}

/** The search box and its results panel; `teardown` cancels what is in flight. */
export function searchBox(initial: string, onQuery: (q: string) => void): { input: HTMLInputElement; panel: HTMLElement; teardown: () => void } {
  const input = h('input', {
    type: 'search', id: 'event-search', value: initial, 'aria-label': 'search events',
    placeholder: 'search events: words, "a phrase", tool:name, type:tool/result, label:k=v',
  });
  const summary = h('div', { class: 'search-summary', id: 'search-summary' });
  const list = h('ol', { class: 'search-hits', id: 'search-hits' });
  const more = h('button', { type: 'button', id: 'search-more', hidden: true }, 'More results');
  const panel = h('section', { class: 'search-results', id: 'search-results', 'data-state': 'idle', hidden: true }, summary, list, more);
  let inFlight: AbortController | undefined;
  let debounce: ReturnType<typeof setTimeout> | undefined;
  let query = '';
  let nextToken = '';
  let shown = 0;

  const setState = (state: 'idle' | 'loading' | 'results' | 'empty' | 'error'): void => {
    panel.setAttribute('data-state', state);
    panel.hidden = state === 'idle';
  };

  async function run(q: string, pageToken: string): Promise<void> {
    inFlight?.abort();
    const ac = new AbortController();
    inFlight = ac;
    if (pageToken === '') {
      setState('loading');
      summary.replaceChildren(h('span', { class: 'muted' }, 'searching…'));
    }
    more.disabled = true;
    try {
      const r = await api.searchEvents({ query: q, pageSize: PAGE_SIZE, pageToken }, { signal: ac.signal });
      if (ac.signal.aborted) return;
      if (pageToken === '') {
        list.replaceChildren();
        shown = 0;
      }
      list.append(...r.hits.map(hitRow));
      shown += r.hits.length;
      nextToken = r.nextPageToken;
      more.hidden = nextToken === '';
      more.disabled = false;
      if (shown === 0) {
        setState('empty');
        summary.replaceChildren(h('span', { class: 'empty-hits' }, 'No events match ', h('code', {}, q), '.'));
      } else {
        setState('results');
        summary.replaceChildren(h('span', {}, `${shown}${nextToken ? '+' : ''} matching event${shown === 1 && !nextToken ? '' : 's'}`));
      }
    } catch (e) {
      if (ac.signal.aborted || isCancel(e)) return;
      const f = failure(e);
      const position = f.metadata['position'];
      setState('error');
      list.replaceChildren();
      more.hidden = true;
      summary.replaceChildren(h('div', { class: 'search-error', role: 'alert' },
        h('span', { class: 'code' }, f.code),
        f.reason ? h('span', { class: 'reason', 'data-reason': f.reason }, f.reason) : null,
        h('span', { class: 'message' }, f.message),
        position === undefined ? null : queryAt(q, Number(position))));
    } finally {
      if (inFlight === ac) inFlight = undefined;
    }
  }

  function start(): void {
    const q = input.value.trim();
    onQuery(q);
    query = q;
    if (q === '') {
      inFlight?.abort();
      list.replaceChildren();
      setState('idle');
      return;
    }
    void run(q, '');
  }

  input.addEventListener('input', () => {
    clearTimeout(debounce);
    // The answer of the previous query is no longer wanted.
    inFlight?.abort();
    debounce = setTimeout(start, DEBOUNCE_MS);
  });
  input.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape') {
      input.value = '';
      clearTimeout(debounce);
      start();
    } else if (ev.key === 'ArrowDown') {
      const first = list.querySelector<HTMLAnchorElement>('a.search-hit');
      if (first) {
        ev.preventDefault();
        first.focus();
      }
    }
  });
  // Up and down move between the hits (Enter opens one: it is a link); up from the first goes
  // back to the box.
  list.addEventListener('keydown', (ev) => {
    if (ev.key !== 'ArrowDown' && ev.key !== 'ArrowUp') return;
    const hits = [...list.querySelectorAll<HTMLAnchorElement>('a.search-hit')];
    const i = hits.indexOf(document.activeElement as HTMLAnchorElement);
    if (i < 0) return;
    ev.preventDefault();
    const to = ev.key === 'ArrowDown' ? hits[Math.min(i + 1, hits.length - 1)] : hits[i - 1];
    (to ?? input).focus();
  });
  more.addEventListener('click', () => {
    if (nextToken) void run(query, nextToken);
  });
  if (initial.trim() !== '') start();
  return {
    input, panel, teardown: () => {
      clearTimeout(debounce);
      inFlight?.abort();
    },
  };
}
