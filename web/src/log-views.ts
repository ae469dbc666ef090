/**
 * The session page's second and third views: the human transcript (GetMessages TRANSCRIPT, pages
 * of 200, "load more") and the raw event log (ListEvents, pages of 100 with every field).
 */
import type { SessionEvent } from '../../gen/es/palimpsest/v1/event_pb.js';
import { Direction, MessageView } from '../../gen/es/palimpsest/v1/service_pb.js';
import { api, isCancel } from './api.js';
import { h, when } from './dom.js';
import { parseMessage, renderContent, sourceLine, toolResults, type ResultLookup } from './render-message.js';
import { showError } from './ui.js';
import { blobRefsIn, blobView } from './blob-view.js';

const EVENTS_PAGE = 100;
const TRANSCRIPT_PAGE = 200;

/** What the views need from the session page. */
export interface ViewContext {
  readonly id: string;
  readonly signal: AbortSignal;
  /** The slider's seq (undefined = now). */
  readonly asOf: number | undefined;
  /** Whether a seq is on the current surface. */
  onSurface(seq: number): boolean;
  readonly results: ResultLookup;
  /** False once the page is gone (late answers are dropped). */
  alive(): boolean;
}


export function transcriptView(v: ViewContext): HTMLElement {
  const box = h('div', { class: 'transcript', id: 'transcript' });
  const more = h('button', { type: 'button', id: 'transcript-more', hidden: true }, 'Load more');
  let token = '';
  const load = async () => {
    try {
      const r = await api.getMessages({ sessionId: v.id, view: MessageView.TRANSCRIPT, pageSize: TRANSCRIPT_PAGE, pageToken: token, blobRefs: true, ...(v.asOf === undefined ? {} : { asOfSeq: BigInt(v.asOf) }) }, { signal: v.signal });
      for (const x of r.messages) {
        const msg = parseMessage(x.messageJson);
        const role = typeof msg?.['role'] === 'string' ? (msg['role'] as string) : 'event';
        const shadowedNow = !v.onSurface(Number(x.seq));
        box.append(h('article', { class: `entry role-${toolResults(msg ?? {}).length ? 'tool' : role}${shadowedNow ? ' off-surface' : ''}`, 'data-seq': String(x.seq) },
          h('div', { class: 'gutter' }, h('span', { class: 'seq' }, `#${x.seq}`)),
          h('div', { class: 'bubble' },
            h('div', { class: 'meta' }, h('span', { class: 'role' }, role), msg ? h('span', { class: 'source' }, sourceLine(msg)) : null,
              shadowedNow ? h('span', { class: 'badge muted' }, 'no longer on the surface') : null),
            h('div', { class: 'content' }, renderContent(msg?.['content'], v.results)))));
      }
      token = r.nextPageToken;
      more.hidden = token === '';
      if (box.childElementCount === 0) box.append(h('div', { class: 'empty' }, 'No transcript messages.'));
    } catch (e) {
      if (v.alive() && !isCancel(e)) showError(e, 'Reading the transcript');
    }
  };
  more.addEventListener('click', () => void load());
  void load();
  return h('div', {}, box, more);
}

/** The types of the event vocabulary (docs/events.md), for the event log's filter. */
const EVENT_TYPES = [
  'user/message', 'assistant/message', 'assistant/chunk', 'tool/call', 'tool/result', 'turn/start', 'turn/end', 'step/start', 'step/end',
  'compaction/start', 'compaction/summary', 'compaction/end', 'compaction/prune',
];

/** An assistant/chunk in one compact line, as the CLI shows it: `text-delta[0] "Let me"`. */
export function chunkLine(e: SessionEvent): string | undefined {
  if (e.type !== 'assistant/chunk' || e.data?.kind.case !== 'json') return undefined;
  let c: Record<string, unknown>;
  try {
    c = ((JSON.parse(e.data.kind.value) as { chunk?: Record<string, unknown> }).chunk ?? {});
  } catch {
    return undefined;
  }
  const at = c['index'] === undefined ? '' : `[${String(c['index'])}]`;
  switch (c['type']) {
    case 'text-delta':
    case 'reasoning-delta':
      return `${c['type']}${at} ${JSON.stringify(c['text'])}`;
    case 'tool-call-delta':
      return `${c['type']}${at} ${c['name'] === undefined ? '' : `${String(c['name'])} `}${JSON.stringify(c['argumentsDelta'])}`;
    case 'block-start':
      return `${c['type']}${at} ${String(c['blockType'])}`;
    case 'block-end':
      return `${c['type']}${at} ${String((c['block'] as { type?: unknown } | undefined)?.type)}`;
    case 'finish':
      return `finish ${String(c['reason'])}`;
    case 'usage':
      return `usage ${JSON.stringify(c['usage'])}`;
    default:
      return undefined;
  }
}

/** The blob references in an event's JSON data. */
function blobRefsOf(json: string): ReturnType<typeof blobRefsIn> {
  try {
    return json.includes('"$blob"') ? blobRefsIn(JSON.parse(json) as Parameters<typeof blobRefsIn>[0]) : [];
  } catch {
    return [];
  }
}

export function eventsView(v: ViewContext): HTMLElement {
  const body = h('tbody');
  const prev = h('button', { type: 'button', id: 'events-prev', disabled: true }, '← Earlier');
  const next = h('button', { type: 'button', id: 'events-next', disabled: true }, 'Later →');
  const info = h('span', { class: 'muted', id: 'events-range' });
  const pages: string[] = [];
  let current = '';
  let nextToken = '';
  const opText = (e: SessionEvent) => e.surfaceOp.case === 'append' ? 'append' : e.surfaceOp.case === 'replace' ? `replace ${e.surfaceOp.value.start}–${e.surfaceOp.value.end}` : '';
  const dataText = (e: SessionEvent) => {
    const k = e.data?.kind;
    if (k?.case === 'json') {
      try {
        return JSON.stringify(JSON.parse(k.value), null, 2);
      } catch {
        return k.value;
      }
    }
    return k?.case ?? '';
  };
  // The type filter: a ListEvents `types` filter (empty = every type).
  const typeFilter = h('select', { id: 'event-type-filter', 'aria-label': 'event type' },
    h('option', { value: '' }, 'all types'), ...EVENT_TYPES.map((t) => h('option', { value: t }, t)));
  typeFilter.addEventListener('change', () => {
    pages.length = 0;
    current = '';
    void load();
  });
  const load = async () => {
    try {
      const types = typeFilter.value ? [typeFilter.value] : [];
      // Blobbed values (images, large strings) as references: a page of image-heavy events is small.
      const r = await api.listEvents({ sessionId: v.id, direction: Direction.FORWARD, pageSize: EVENTS_PAGE, pageToken: current, types, blobRefs: true }, { signal: v.signal });
      body.replaceChildren(...r.events.map((e) => {
        const chunk = chunkLine(e);
        if (chunk !== undefined) {
          return h('tr', { 'data-seq': String(e.seq), 'data-chunk': 'true', class: 'chunk' },
            h('td', { class: 'num mono' }, String(e.seq)),
            h('td', { class: 'mono nowrap' }, when(e.time)),
            h('td', { class: 'mono' }, e.type),
            h('td', { class: 'mono chunk-line', colspan: 4 }, chunk));
        }
        const text = dataText(e);
        const blobs = e.data?.kind.case === 'json' ? blobRefsOf(e.data.kind.value) : [];
        return h('tr', { 'data-seq': String(e.seq), class: v.onSurface(Number(e.seq)) ? 'on-surface' : '' },
          h('td', { class: 'num mono' }, String(e.seq)),
          h('td', { class: 'mono nowrap' }, when(e.time)),
          h('td', { class: 'mono' }, e.type),
          h('td', { class: 'mono nowrap' }, opText(e)),
          h('td', { class: 'mono' }, e.sourceEventSeqs ? `[${e.sourceEventSeqs.seqs.join(', ')}]` : '—'),
          h('td', {}, e.ignorable ? 'yes' : ''),
          h('td', { class: 'data' }, text.length > 160
            ? h('details', {}, h('summary', { class: 'mono' }, `${text.replace(/\s+/g, ' ').slice(0, 120)}…`), h('pre', {}, text))
            : h('pre', {}, text),
          blobs.length > 0 ? h('div', { class: 'blobs' }, blobs.map(blobView)) : null));
      }));
      const first = r.events[0]?.seq;
      const last = r.events[r.events.length - 1]?.seq;
      info.textContent = first === undefined ? 'no events' : `seq ${first}–${last}`;
      nextToken = r.nextPageToken;
      next.disabled = nextToken === '';
      prev.disabled = pages.length === 0;
    } catch (e) {
      if (v.alive() && !isCancel(e)) showError(e, 'Reading the event log');
    }
  };
  next.addEventListener('click', () => {
    pages.push(current);
    current = nextToken;
    void load();
  });
  prev.addEventListener('click', () => {
    current = pages.pop() ?? '';
    void load();
  });
  void load();
  return h('div', { class: 'events' },
    h('div', { class: 'pager' }, typeFilter, prev, info, next),
    h('table', { class: 'event-log', id: 'event-log' },
      h('thead', {}, h('tr', {}, ...['seq', 'time', 'type', 'surface op', 'sources', 'ignorable', 'data'].map((c) => h('th', {}, c)))),
      body));
}
