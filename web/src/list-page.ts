/**
 * The session list: newest first, label filter (`k=v, k2=v2`), pages of 50 with previous/next,
 * LIVE from the session feed (issue #35 item 5): the page is listed once (ListSessions) after
 * SubscribeSessions caught up from now, then every change updates its row in place (created,
 * deleted, labels_changed, appended). A dropped stream resumes after the last feed position it
 * received, so nothing is missed and nothing is polled. The stream asks for batches
 * (SubscribeSessionsRequest.batch): changes ready together arrive in one message and are applied
 * one at a time, in order.
 *
 * Columns: id, labels, created, last activity (relative; the time of the newest event, then of
 * each change the feed reports), events, surface length, surface tokens and status. Surface
 * tokens (Session.surface_tokens, set by GetSession only) and the status (derived from the tail
 * of the log, session-status.ts) are fetched lazily for the rows on screen, again after an
 * append while on screen (at most one fetch a second per row); until known they show `…`.
 */
import { create } from '@bufbuild/protobuf';
import { SessionSchema, type Session } from '../../gen/es/palimpsest/v1/session_pb.js';
import { Direction, SessionChangeKind, type SessionChange } from '../../gen/es/palimpsest/v1/service_pb.js';
import { api, isCancel, isPermanent } from './api.js';
import { h, when } from './dom.js';
import { setCrumbs, showError, type Page } from './ui.js';
import { fetchStatus, STATUS_TEXT, STATUS_TYPES, type SessionStatus } from './session-status.js';
import { searchBox } from './search-box.js';

const PAGE_SIZE = 50;
/** Relative times are re-rendered this often (no request). */
const TICK_MS = 5000;
/** Minimum time between two detail fetches of one row. */
const DETAIL_SPACING_MS = 1000;
const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 10_000;

/** Sets (or with '' removes) one query parameter of the list's URL, keeping the others. */
function setParam(name: string, value: string): void {
  const params = new URLSearchParams(location.search);
  if (value) params.set(name, value);
  else params.delete(name);
  const qs = params.toString();
  history.replaceState(null, '', qs ? `/?${qs}` : '/');
}

function parseLabels(text: string): Record<string, string> | string {
  const out: Record<string, string> = {};
  for (const part of text.split(',').map((p) => p.trim()).filter((p) => p !== '')) {
    const i = part.indexOf('=');
    if (i <= 0) return `"${part}" is not key=value`;
    out[part.slice(0, i).trim()] = part.slice(i + 1).trim();
  }
  return out;
}

/** `12s ago`, `3m ago`, `2h ago`, `5d ago`. */
export function relative(ms: number, now: number): string {
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 5) return 'just now';
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86_400)}d ago`;
}

/** One row and what is known about its session. */
interface Row {
  readonly id: string;
  createdAt: bigint;
  eventCount: bigint;
  surfaceLength: bigint;
  labels: Record<string, string>;
  /** Time of the newest event or change (ms); undefined until known. */
  lastActivity: number | undefined;
  tokens: bigint | undefined;
  status: SessionStatus | undefined;
  /** The details (tokens, last activity, status) must be fetched again. */
  tokensStale: boolean;
  statusStale: boolean;
  visible: boolean;
  fetching: boolean;
  lastFetch: number;
  readonly el: HTMLTableRowElement;
  readonly cells: {
    labels: HTMLElement; activity: HTMLElement; events: HTMLElement; surface: HTMLElement; tokens: HTMLElement; status: HTMLElement;
  };
}

export function listPage(root: HTMLElement): Page {
  setCrumbs('sessions');
  const params = new URLSearchParams(location.search);
  const filter = h('input', { type: 'search', id: 'label-filter', placeholder: 'label filter: key=value, key2=value2', value: params.get('labels') ?? '' });
  const filterError = h('span', { class: 'field-error' });
  const body = h('tbody');
  const status = h('span', { class: 'muted', id: 'list-status', 'data-state': 'connecting' }, 'connecting…');
  const prev = h('button', { type: 'button', id: 'prev-page' }, '← Newer');
  const next = h('button', { type: 'button', id: 'next-page' }, 'Older →');
  const ac = new AbortController();
  /** Tokens of the pages before the current one (the first page has token ''). */
  const tokens: string[] = [];
  let current = '';
  let nextToken = '';
  let selector: Record<string, string> = {};
  const rows = new Map<string, Row>();
  /** Feed changes received while a page is being listed (applied after it). */
  let buffered: SessionChange[] | undefined = [];
  let loadSeq = 0;
  /** The feed of the current selector (aborted when the selector changes). */
  let feed: AbortController | undefined;

  const setState = (state: 'connecting' | 'live' | 'reconnecting', text: string): void => {
    status.setAttribute('data-state', state);
    status.textContent = text;
  };

  // Clicking anywhere on a row opens the session (through its link, so the router handles it).
  const openRow = (ev: Event): void => {
    const target = ev.target as Element;
    if (target.closest('a') || window.getSelection()?.toString()) return;
    (target.closest('tr')?.querySelector('a[data-link]') as HTMLAnchorElement | null)?.click();
  };

  const observer = new IntersectionObserver((entries) => {
    for (const entry of entries) {
      const row = rows.get((entry.target as HTMLElement).dataset['sessionId'] ?? '');
      if (!row) continue;
      row.visible = entry.isIntersecting;
      if (row.visible) void details(row);
    }
  }, { rootMargin: '200px' });

  function render(row: Row): void {
    const c = row.cells;
    c.labels.replaceChildren(...Object.entries(row.labels).sort().map(([k, v]) => h('span', { class: 'chip' }, `${k}=${v}`)));
    c.events.textContent = String(row.eventCount);
    c.surface.textContent = String(row.surfaceLength);
    c.tokens.setAttribute('data-known', String(row.tokens !== undefined));
    c.tokens.textContent = row.tokens === undefined ? '…' : String(row.tokens);
    c.status.setAttribute('data-status', row.status ?? '');
    c.status.replaceChildren(row.status === undefined ? '…' : h('span', { class: `status status-${row.status}` }, STATUS_TEXT[row.status]));
    if (row.status === 'unknown') c.status.title = 'more than 1,000 turn events since the last turn boundary: not scanned';
    renderActivity(row, Date.now());
  }

  function renderActivity(row: Row, now: number): void {
    const c = row.cells.activity;
    if (row.lastActivity === undefined) {
      c.textContent = '…';
      c.removeAttribute('data-time');
      return;
    }
    c.setAttribute('data-time', String(row.lastActivity));
    c.title = when(row.lastActivity);
    c.textContent = relative(row.lastActivity, now);
  }

  function makeRow(s: Pick<Session, 'id' | 'createdAt' | 'eventCount' | 'surfaceLength' | 'labels' | 'headSeq'>): Row {
    const cell = (attrs: Record<string, string>): HTMLElement => h('td', attrs);
    const cells = {
      labels: cell({}),
      activity: cell({ class: 'nowrap', 'data-field': 'last-activity' }),
      events: cell({ class: 'num', 'data-field': 'event-count' }),
      surface: cell({ class: 'num', 'data-field': 'surface-length' }),
      tokens: cell({ class: 'num', 'data-field': 'surface-tokens' }),
      status: cell({ class: 'nowrap', 'data-field': 'status' }),
    };
    const el = h('tr', { 'data-session-id': s.id, class: 'clickable', onclick: openRow },
      h('td', {}, h('a', { href: `/sessions/${encodeURIComponent(s.id)}`, 'data-link': true, class: 'mono' }, s.id)),
      cells.labels,
      h('td', { class: 'mono nowrap' }, when(s.createdAt)),
      cells.activity, cells.events, cells.surface, cells.tokens, cells.status,
    );
    const row: Row = {
      id: s.id, createdAt: s.createdAt, eventCount: s.eventCount, surfaceLength: s.surfaceLength, labels: { ...s.labels },
      // An empty log's last activity is its creation.
      lastActivity: s.headSeq === undefined ? Number(s.createdAt) : undefined,
      tokens: undefined, status: s.headSeq === undefined ? 'no-turns' : undefined,
      tokensStale: true, statusStale: s.headSeq !== undefined,
      visible: false, fetching: false, lastFetch: 0, el, cells,
    };
    render(row);
    return row;
  }

  /** Fetches what the list does not carry (tokens, last event time, status) for a row on screen. */
  async function details(row: Row): Promise<void> {
    if (row.fetching || !row.visible || ac.signal.aborted) return;
    if (!row.tokensStale && !row.statusStale && row.lastActivity !== undefined) return;
    const wait = row.lastFetch + DETAIL_SPACING_MS - Date.now();
    row.fetching = true;
    try {
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      row.lastFetch = Date.now();
      const wantStatus = row.statusStale;
      const wantTime = row.lastActivity === undefined;
      row.tokensStale = false;
      row.statusStale = false;
      const [got, last, st] = await Promise.all([
        api.getSession({ sessionId: row.id }, { signal: ac.signal }),
        wantTime ? api.listEvents({ sessionId: row.id, direction: Direction.BACKWARD, pageSize: 1 }, { signal: ac.signal }) : undefined,
        wantStatus ? fetchStatus(row.id, ac.signal) : undefined,
      ]);
      if (rows.get(row.id) !== row) return;
      const s = got.session;
      if (s && s.createdAt === row.createdAt) {
        row.tokens = s.surfaceTokens;
        if (s.eventCount >= row.eventCount) {
          row.eventCount = s.eventCount;
          row.surfaceLength = s.surfaceLength;
        }
      }
      const e = last?.events[0];
      if (wantTime && row.lastActivity === undefined) row.lastActivity = e ? Number(e.time) : Number(row.createdAt);
      if (st !== undefined) row.status = st;
      render(row);
    } catch (e) {
      if (isCancel(e) || ac.signal.aborted) return;
      // A session deleted meanwhile disappears with the feed's `deleted`; others show `?`.
      if (row.tokens === undefined) row.cells.tokens.textContent = '?';
    } finally {
      row.fetching = false;
    }
    if (row.tokensStale || row.statusStale) void details(row);
  }

  function matches(labels: Record<string, string>): boolean {
    return Object.entries(selector).every(([k, v]) => labels[k] === v);
  }

  function showEmpty(): void {
    const empty = body.querySelector('tr.empty-row');
    if (rows.size > 0) {
      empty?.remove();
      return;
    }
    if (!empty) body.replaceChildren(h('tr', { class: 'empty-row' }, h('td', { colspan: 8, class: 'empty' }, tokens.length ? 'No more sessions.' : 'No sessions yet. Create one with `palimpsest create`.')));
  }

  function remove(id: string): void {
    const row = rows.get(id);
    if (!row) return;
    observer.unobserve(row.el);
    row.el.remove();
    rows.delete(id);
    showEmpty();
  }

  /** Adds a row for a session new to this page, where newest-first order puts it. */
  function insert(c: SessionChange): void {
    if (tokens.length > 0) return; // only the first page shows the newest sessions
    // A session older than the page's oldest belongs to a later page (relabelled into the filter).
    const oldest = [...rows.values()].reduce<bigint | undefined>((m, r) => (m === undefined || r.createdAt < m ? r.createdAt : m), undefined);
    if (nextToken !== '' && oldest !== undefined && c.createdAt < oldest) return;
    const row = makeRow(create(SessionSchema, { id: c.sessionId, createdAt: c.createdAt, eventCount: c.eventCount, surfaceLength: c.surfaceLength, labels: c.labels, ...(c.headSeq === undefined ? {} : { headSeq: c.headSeq }) }));
    if (c.headSeq !== undefined) row.lastActivity = Number(c.time);
    render(row);
    rows.set(row.id, row);
    const before = [...rows.values()].find((r) => r !== row && r.createdAt <= row.createdAt);
    body.querySelector('tr.empty-row')?.remove();
    if (before) body.insertBefore(row.el, before.el);
    else body.append(row.el);
    observer.observe(row.el);
  }

  function apply(c: SessionChange): void {
    const row = rows.get(c.sessionId);
    switch (c.kind) {
      case SessionChangeKind.CREATED:
        if (row && row.createdAt === c.createdAt) return; // already listed
        if (row) remove(c.sessionId); // a re-created id
        insert(c);
        return;
      case SessionChangeKind.DELETED:
        if (row && row.createdAt === c.createdAt) remove(c.sessionId);
        return;
      case SessionChangeKind.LABELS_CHANGED:
        if (!matches(c.labels)) remove(c.sessionId);
        else if (!row) insert(c);
        else {
          row.labels = { ...c.labels };
          render(row);
        }
        return;
      case SessionChangeKind.APPENDED:
        if (!row || row.createdAt !== c.createdAt || c.eventCount < row.eventCount) return;
        row.eventCount = c.eventCount;
        row.surfaceLength = c.surfaceLength;
        row.lastActivity = Number(c.time);
        row.tokensStale = true;
        if (c.eventTypes.some((t) => STATUS_TYPES.includes(t))) row.statusStale = true;
        render(row);
        void details(row);
        return;
      default:
    }
  }

  /** Lists the current page once; feed changes meanwhile wait and are applied after it. */
  async function load(): Promise<void> {
    const mine = ++loadSeq;
    buffered ??= [];
    try {
      const page = await api.listSessions({ pageSize: PAGE_SIZE, pageToken: current, labelSelector: selector }, { signal: ac.signal });
      if (ac.signal.aborted || mine !== loadSeq) return;
      for (const row of rows.values()) observer.unobserve(row.el);
      rows.clear();
      body.replaceChildren();
      for (const s of page.sessions) {
        const row = makeRow(s);
        rows.set(s.id, row);
        body.append(row.el);
        observer.observe(row.el);
      }
      showEmpty();
      nextToken = page.nextPageToken;
      next.disabled = nextToken === '';
      prev.disabled = tokens.length === 0;
      const pending = buffered;
      buffered = undefined;
      for (const c of pending) apply(c);
      showError(undefined);
    } catch (e) {
      if (!ac.signal.aborted && mine === loadSeq) {
        buffered = undefined;
        showError(e, 'Listing sessions');
      }
    }
  }

  /** Follows the feed of the current selector: lists after the first caught-up, resumes after drops. */
  async function follow(): Promise<void> {
    feed?.abort();
    const mine = new AbortController();
    feed = mine;
    const signal = AbortSignal.any([ac.signal, mine.signal]);
    let position: bigint | undefined;
    let listed = false;
    let delay = RETRY_MIN_MS;
    buffered = [];
    setState('connecting', 'connecting…');
    while (!signal.aborted) {
      try {
        // batch: changes ready together come in one message, applied one at a time in order.
        const stream = api.subscribeSessions({ labelSelector: selector, batch: true, ...(position === undefined ? { fromNow: true } : { after: position }) }, { signal });
        for await (const m of stream) {
          position = m.position;
          status.setAttribute('data-position', String(position));
          if (m.kind.case === 'caughtUp') {
            delay = RETRY_MIN_MS;
            setState('live', 'live');
            if (!listed) {
              listed = true;
              void load();
            }
          } else if (m.kind.case === 'change' || m.kind.case === 'changes') {
            for (const c of m.kind.case === 'change' ? [m.kind.value] : m.kind.value.changes) {
              if (buffered) buffered.push(c);
              else apply(c);
            }
          }
        }
      } catch (e) {
        if (signal.aborted || isCancel(e)) return;
        if (isPermanent(e)) {
          setState('reconnecting', 'stopped');
          showError(e, 'Following the session list');
          return;
        }
      }
      if (signal.aborted) return;
      setState('reconnecting', 'reconnecting…');
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, RETRY_MAX_MS);
    }
  }

  function restart(): void {
    const labels = parseLabels(filter.value);
    if (typeof labels === 'string') {
      filterError.textContent = labels;
      return;
    }
    filterError.textContent = '';
    selector = labels;
    tokens.length = 0;
    current = '';
    void follow();
  }

  let debounce: ReturnType<typeof setTimeout> | undefined;
  filter.addEventListener('input', () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => {
      const q = filter.value.trim();
      setParam('labels', q);
      restart();
    }, 250);
  });
  next.addEventListener('click', () => {
    if (!nextToken) return;
    tokens.push(current);
    current = nextToken;
    void load();
  });
  prev.addEventListener('click', () => {
    if (tokens.length === 0) return;
    current = tokens.pop() as string;
    void load();
  });
  const tick = setInterval(() => {
    const now = Date.now();
    for (const row of rows.values()) renderActivity(row, now);
  }, TICK_MS);

  const search = searchBox(params.get('q') ?? '', (q) => setParam('q', q));
  root.append(h('section', { class: 'list' },
    h('div', { class: 'toolbar search-bar' }, search.input),
    search.panel,
    h('div', { class: 'toolbar' }, h('h1', {}, 'Sessions'), filter, filterError, h('span', { class: 'spacer' }), status),
    h('table', { class: 'sessions' },
      h('thead', {}, h('tr', {},
        h('th', {}, 'id'), h('th', {}, 'labels'), h('th', {}, 'created'), h('th', {}, 'last activity'),
        h('th', { class: 'num' }, 'events'), h('th', { class: 'num' }, 'surface'), h('th', { class: 'num', title: 'the model history\'s estimated size (server estimator)' }, 'tokens'), h('th', {}, 'status'))),
      body),
    h('div', { class: 'pager' }, prev, next),
  ));
  restart();
  return () => {
    ac.abort();
    feed?.abort();
    observer.disconnect();
    clearInterval(tick);
    clearTimeout(debounce);
    search.teardown();
  };
}
