/**
 * The session list: newest first, label filter (`k=v, k2=v2`), pages of 50 with previous/next,
 * refreshed every few seconds while the tab is visible (there is no list stream: a poll is a
 * cheap ListSessions page).
 */
import type { Session } from '../../gen/es/palimpsest/v1/session_pb.js';
import { api } from './api.js';
import { h, when } from './dom.js';
import { setCrumbs, showError, type Page } from './ui.js';

const PAGE_SIZE = 50;
const REFRESH_MS = 3000;

function parseLabels(text: string): Record<string, string> | string {
  const out: Record<string, string> = {};
  for (const part of text.split(',').map((p) => p.trim()).filter((p) => p !== '')) {
    const i = part.indexOf('=');
    if (i <= 0) return `"${part}" is not key=value`;
    out[part.slice(0, i).trim()] = part.slice(i + 1).trim();
  }
  return out;
}

export function listPage(root: HTMLElement): Page {
  setCrumbs('sessions');
  const params = new URLSearchParams(location.search);
  const filter = h('input', { type: 'search', id: 'label-filter', placeholder: 'label filter: key=value, key2=value2', value: params.get('labels') ?? '' });
  const filterError = h('span', { class: 'field-error' });
  const body = h('tbody');
  const status = h('span', { class: 'muted', id: 'list-status' });
  const prev = h('button', { type: 'button', id: 'prev-page' }, '← Newer');
  const next = h('button', { type: 'button', id: 'next-page' }, 'Older →');
  /** Tokens of the pages before the current one (the first page has token ''). */
  const tokens: string[] = [];
  let current = '';
  let nextToken = '';
  let timer: ReturnType<typeof setTimeout> | undefined;
  let gone = false;
  let loadSeq = 0;

  // Clicking anywhere on a row opens the session (through its link, so the router handles it).
  const openRow = (ev: Event): void => {
    const target = ev.target as Element;
    if (target.closest('a') || window.getSelection()?.toString()) return;
    (target.closest('tr')?.querySelector('a[data-link]') as HTMLAnchorElement | null)?.click();
  };
  const row = (s: Session) => h('tr', { 'data-session-id': s.id, class: 'clickable', onclick: openRow },
    h('td', {}, h('a', { href: `/sessions/${encodeURIComponent(s.id)}`, 'data-link': true, class: 'mono' }, s.id)),
    h('td', {}, Object.entries(s.labels).sort().map(([k, v]) => h('span', { class: 'chip' }, `${k}=${v}`))),
    h('td', { class: 'mono nowrap' }, when(s.createdAt)),
    h('td', { class: 'num', 'data-field': 'event-count' }, String(s.eventCount)),
    h('td', { class: 'num', 'data-field': 'surface-length' }, String(s.surfaceLength)),
  );

  async function load(): Promise<void> {
    const mine = ++loadSeq;
    const labels = parseLabels(filter.value);
    if (typeof labels === 'string') {
      filterError.textContent = labels;
      return;
    }
    filterError.textContent = '';
    try {
      const page = await api.listSessions({ pageSize: PAGE_SIZE, pageToken: current, labelSelector: labels });
      if (gone || mine !== loadSeq) return;
      body.replaceChildren(...page.sessions.map(row));
      if (page.sessions.length === 0) body.replaceChildren(h('tr', {}, h('td', { colspan: 5, class: 'empty' }, tokens.length ? 'No more sessions.' : 'No sessions yet. Create one with `palimpsest create`.')));
      nextToken = page.nextPageToken;
      next.disabled = nextToken === '';
      prev.disabled = tokens.length === 0;
      status.textContent = `updated ${new Date().toLocaleTimeString()}`;
      showError(undefined);
    } catch (e) {
      if (!gone) showError(e, 'Listing sessions');
    }
  }

  function schedule(): void {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      if (!document.hidden) await load();
      if (!gone) schedule();
    }, REFRESH_MS);
  }

  let debounce: ReturnType<typeof setTimeout> | undefined;
  filter.addEventListener('input', () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => {
      tokens.length = 0;
      current = '';
      const q = filter.value.trim();
      history.replaceState(null, '', q ? `/?labels=${encodeURIComponent(q)}` : '/');
      void load();
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

  root.append(h('section', { class: 'list' },
    h('div', { class: 'toolbar' }, h('h1', {}, 'Sessions'), filter, filterError, h('span', { class: 'spacer' }), status),
    h('table', { class: 'sessions' },
      h('thead', {}, h('tr', {}, h('th', {}, 'id'), h('th', {}, 'labels'), h('th', {}, 'created'), h('th', { class: 'num' }, 'events'), h('th', { class: 'num' }, 'surface'))),
      body),
    h('div', { class: 'pager' }, prev, next),
  ));
  void load().then(schedule);
  return () => {
    gone = true;
    clearTimeout(timer);
    clearTimeout(debounce);
  };
}
