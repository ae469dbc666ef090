/**
 * One session (`/sessions/<id>`): the model history as the model sees it (the surface), each
 * replacement with what it shadows underneath; the human transcript; the raw event log; and a
 * time slider over seqs.
 *
 * The model view is driven by one SubscribeSurface stream from the start of the log (with
 * messages, and blob_refs: images come as references, loaded when scrolled into view): its append / replace deltas rebuild the surface exactly, and a replace delta names
 * the seqs it shadowed, whose messages arrived earlier in the same stream. After `caught_up` the
 * same stream is the live feed: an append adds one entry, a replace swaps the affected range for
 * the replacement (and re-renders the tool call whose result changed). A dropped stream is
 * resumed from its last cursor, with backoff. The slider reads GetSurface / GetMessages with
 * `as_of_seq`; live deltas keep arriving meanwhile and show again at "now".
 */
import { Code, ConnectError } from '@connectrpc/connect';
import type { Session } from '../../gen/es/palimpsest/v1/session_pb.js';
import type { SessionEvent } from '../../gen/es/palimpsest/v1/event_pb.js';
import { Direction, MessageView } from '../../gen/es/palimpsest/v1/service_pb.js';
import { api, isCancel, isPermanent } from './api.js';
import { h, when } from './dom.js';
import { setCrumbs, showError, type Page } from './ui.js';
import { parseMessage, preview, renderContent, resultBytes, sourceLine, toolResults, type MessageJson } from './render-message.js';
import { estimateMessageTokens } from '../../src/domain/token-estimate.js';
import { formatBytes, refInflation } from './blob-ref.js';
import { eventsView, transcriptView, type ViewContext } from './log-views.js';
import { revealSeq, targetSeq } from './seq-target.js';

/** What the viewer knows of one surface-touching event. */
interface Entry {
  readonly seq: number;
  readonly type: string;
  readonly time: number;
  /** undefined = appended; otherwise the replaced range. */
  readonly replace?: { readonly start: number; readonly end: number };
  /** The seqs this replacement shadowed (in surface order). */
  readonly shadowed?: readonly number[];
  readonly message: MessageJson | undefined;
  /** UTF-8 bytes of the message's JSON, and its tokens by the server's compaction estimator. */
  readonly bytes: number;
  readonly tokens: number;
}

const utf8 = new TextEncoder();

type View = 'model' | 'transcript' | 'events';

/** Model-view entries on the page at once (newest first; earlier ones on demand). */
const WINDOW = 500;


function roleOf(e: Entry): string {
  const r = e.message?.['role'];
  if (e.type === 'tool/result') return 'tool';
  return typeof r === 'string' ? r : 'event';
}

function replacementKind(e: Entry): string {
  if (e.type === 'tool/result') return 'Pruned tool result';
  const src = e.message?.['source'];
  if (typeof src === 'object' && src !== null && !Array.isArray(src) && (src as Record<string, unknown>)['plugin'] === 'compact') return 'Compaction summary';
  return 'Replacement';
}

export function sessionPage(root: HTMLElement, id: string): Page {
  setCrumbs(h('a', { href: '/', 'data-link': true }, 'sessions'), h('span', { class: 'sep' }, '/'), h('span', { class: 'mono' }, id));
  let gone = false;
  const ac = new AbortController();

  // ---- state ------------------------------------------------------------------------------
  const entries = new Map<number, Entry>();
  const surface: number[] = [];
  let cursor: bigint | undefined;
  let caughtUp = false;
  let head = -1;
  /** Tool-call id -> seq of the surface message holding the call / the current result. */
  const callSeq = new Map<string, number>();
  const resultSeq = new Map<string, number>();
  let view: View = 'model';
  /** undefined = now (live); otherwise the seq the slider shows. */
  let asOf: number | undefined;
  /** `?seq=` (a search hit): highlighted and scrolled to once the model view caught up. */
  let target = targetSeq(location.search);

  // ---- layout -----------------------------------------------------------------------------
  const title = h('h1', { class: 'mono' }, id);
  const labels = h('div', { class: 'labels' });
  const facts = h('dl', { class: 'facts' });
  const live = h('span', { class: 'live-status', id: 'live-status', 'data-state': 'connecting' }, 'connecting…');
  const tabs = h('div', { class: 'tabs', role: 'tablist' });
  const slider = h('input', { type: 'range', id: 'time-slider', min: 0, max: 0, value: 0, step: 1, disabled: true, 'aria-label': 'time: show the session as of a seq' });
  const sliderLabel = h('span', { class: 'slider-label', id: 'time-label' }, 'now');
  const nowButton = h('button', { type: 'button', id: 'time-now', disabled: true }, 'Now');
  // Turn boundaries: tick marks on the slider (the seqs of turn/start), and steps by turn.
  const turnMarks = h('datalist', { id: 'turn-marks' });
  slider.setAttribute('list', 'turn-marks');
  const prevTurn = h('button', { type: 'button', id: 'time-prev-turn', disabled: true, title: 'the start of the previous turn (PageUp)' }, '◀ turn');
  const nextTurn = h('button', { type: 'button', id: 'time-next-turn', disabled: true, title: 'the start of the next turn (PageDown)' }, 'turn ▶');
  const asOfBanner = h('div', { class: 'as-of-banner', id: 'as-of-banner', hidden: true });
  const totals = h('span', { class: 'totals muted', id: 'surface-totals' });
  const content = h('div', { class: 'view' });
  const surfaceBox = h('div', { class: 'surface', id: 'surface' });

  root.append(h('section', { class: 'session' },
    h('div', { class: 'session-head' }, h('div', {}, title, labels), h('span', { class: 'spacer' }), totals, live),
    facts,
    h('div', { class: 'timebar' }, h('span', { class: 'muted' }, 'Time'), prevTurn, slider, turnMarks, nextTurn, sliderLabel, nowButton),
    asOfBanner,
    tabs,
    content,
  ));

  const tabButton = (v: View, label: string) => h('button', { type: 'button', role: 'tab', 'data-view': v, id: `tab-${v}`, onclick: () => select(v) }, label);
  tabs.append(tabButton('model', 'Model history'), tabButton('transcript', 'Transcript'), tabButton('events', 'Event log'));

  // ---- header -----------------------------------------------------------------------------
  let headerTimer: ReturnType<typeof setTimeout> | undefined;
  async function loadHeader(): Promise<void> {
    try {
      const r = await api.getSession({ sessionId: id }, { signal: ac.signal });
      if (r.session) renderHeader(r.session);
    } catch (e) {
      if (!gone && !isCancel(e)) showError(e, `Reading session ${id}`);
    }
  }
  function refreshHeaderSoon(): void {
    if (headerTimer !== undefined) return;
    headerTimer = setTimeout(() => {
      headerTimer = undefined;
      void loadHeader();
      void loadTurns();
    }, 1000);
  }

  /** Seqs of the session's turn/start events (ListEvents filtered by type), ascending. */
  let turnStarts: number[] = [];
  async function loadTurns(): Promise<void> {
    try {
      const seqs: number[] = [];
      let pageToken = '';
      do {
        const r = await api.listEvents({ sessionId: id, direction: Direction.FORWARD, pageSize: 1000, pageToken, types: ['turn/start'] }, { signal: ac.signal });
        seqs.push(...r.events.map((e) => Number(e.seq)));
        pageToken = r.nextPageToken;
      } while (pageToken !== '' && !gone);
      if (gone) return;
      turnStarts = seqs;
      turnMarks.replaceChildren(...seqs.map((q) => h('option', { value: q, label: `turn start #${q}` })));
      slider.dataset.turnStarts = seqs.join(',');
      updateTurnButtons();
    } catch (e) {
      if (!gone && !isCancel(e)) showError(e, 'Reading the turns');
    }
  }

  function updateTurnButtons(): void {
    const at = asOf ?? head;
    prevTurn.disabled = !turnStarts.some((q) => q < at);
    nextTurn.disabled = asOf === undefined;
  }

  /** Moves the slider to the previous / next turn start (past the last one: now). */
  function stepTurn(dir: -1 | 1): void {
    const at = asOf ?? head;
    const to = dir < 0 ? [...turnStarts].reverse().find((q) => q < at) : turnStarts.find((q) => q > at);
    if (dir < 0 && to === undefined) return;
    slider.value = String(to ?? head);
    void goTo(to === undefined || to >= head ? undefined : to);
  }
  prevTurn.addEventListener('click', () => stepTurn(-1));
  nextTurn.addEventListener('click', () => stepTurn(1));
  slider.addEventListener('keydown', (ev) => {
    if (ev.key !== 'PageUp' && ev.key !== 'PageDown') return;
    ev.preventDefault();
    stepTurn(ev.key === 'PageUp' ? -1 : 1);
  });
  function renderHeader(s: Session): void {
    labels.replaceChildren(...Object.entries(s.labels).sort().map(([k, v]) => h('span', { class: 'chip' }, `${k}=${v}`)));
    const fact = (k: string, v: string, field: string) => [h('dt', {}, k), h('dd', { 'data-field': field }, v)];
    facts.replaceChildren(
      ...fact('created', when(s.createdAt), 'created'),
      ...fact('events', String(s.eventCount), 'event-count'),
      ...fact('surface', String(s.surfaceLength), 'surface-length'),
      ...fact('head seq', s.headSeq === undefined ? '—' : String(s.headSeq), 'head-seq'),
      ...(s.parentSession ? fact('forked from', `${s.parentSession} (${s.seedLength ?? 0} events)`, 'parent') : []),
      ...(s.strict ? fact('mode', 'strict', 'strict') : []),
      ...fact('tool-pairing guard', s.pairingGuard ? 'on' : 'off', 'pairing-guard'),
    );
  }

  // ---- model view: rendering --------------------------------------------------------------
  /** Elements of the surface entries currently in the live model view. */
  const els = new Map<number, HTMLElement>();

  function resultLookup(callId: string) {
    const seq = resultSeq.get(callId);
    const e = seq === undefined ? undefined : entries.get(seq);
    if (!e?.message) return undefined;
    const r = toolResults(e.message).find((x) => x.callId === callId);
    if (!r) return undefined;
    // A pruned copy: its sizes against the original it replaced.
    const original = e.type === 'tool/result' && e.replace ? entries.get(e.shadowed?.[0] ?? -1)?.message : undefined;
    const before = original ? toolResults(original).find((x) => x.callId === callId) : undefined;
    return before ? { seq: e.seq, block: r.block, pruned: { bytesBefore: resultBytes(before.block), bytesAfter: resultBytes(r.block) } } : { seq: e.seq, block: r.block };
  }

  function shadowedRow(seq: number, depth: number): HTMLElement {
    const e = entries.get(seq);
    const row = h('div', { class: `shadowed role-${e ? roleOf(e) : 'event'}`, 'data-seq': seq, 'data-shadowed': 'true' },
      h('div', { class: 'shadowed-head' },
        h('span', { class: 'seq' }, `#${seq}`),
        h('span', { class: 'role' }, e ? roleOf(e) : 'event'),
        h('span', { class: 'type muted' }, e?.type ?? ''),
        h('span', { class: 'shadowed-preview' }, preview(e?.message))),
      e?.message ? h('div', { class: 'shadowed-body' }, renderContent(e.message['content'])) : null,
    );
    if (e?.shadowed && depth < 8) row.append(shadowGroup(e, depth + 1));
    return row;
  }

  function shadowGroup(e: Entry, depth = 0): HTMLElement {
    const n = e.shadowed?.length ?? 0;
    return h('details', { class: 'shadow-group', 'data-replacement': e.seq },
      h('summary', {}, `${n} shadowed event${n === 1 ? '' : 's'} underneath`),
      ...(e.shadowed ?? []).map((s) => shadowedRow(s, depth)));
  }

  /** The seqs on the page being rendered (live: the surface; as of a seq: that surface). */
  let rendered: ReadonlySet<number> = new Set();

  /** The surface seq of the message holding the call of each of `m`'s tool results, when every call is on the page. */
  function foldedInto(m: MessageJson | undefined): number | undefined {
    const results = m ? toolResults(m) : [];
    const calls = results.map((r) => callSeq.get(r.callId));
    if (calls.length === 0 || calls.some((c) => c === undefined || !rendered.has(c))) return undefined;
    return calls[0];
  }

  function entryEl(seq: number, message?: MessageJson): HTMLElement {
    const e = entries.get(seq);
    const m = message ?? e?.message;
    const role = e ? roleOf(e) : 'event';
    const size = e ? h('span', { class: 'size muted', 'data-field': 'size' }, `${formatBytes(e.bytes)} · ≈${e.tokens} tok`) : null;
    const sizeAttrs = e ? { 'data-bytes': e.bytes, 'data-tokens': e.tokens } : {};
    // A tool result is shown once: inside its call (with the pruned marker for a pruned copy).
    const into = e?.type === 'tool/result' ? foldedInto(m) : undefined;
    if (into !== undefined) {
      return h('article', { class: `entry role-tool folded${e?.replace ? ' pruned' : ''}`, 'data-seq': seq, 'data-folded-into': into, ...sizeAttrs },
        h('div', { class: 'gutter' }, h('span', { class: 'seq', title: `seq ${seq}` }, `#${seq}`), size),
        h('div', { class: 'bubble' },
          h('div', { class: 'folded-line muted' },
            e?.replace ? h('span', { class: 'badge' }, replacementKind(e)) : null,
            h('span', {}, ` tool result, shown with its call in `),
            h('a', { href: `#entry-${into}`, class: 'mono', onclick: (ev: Event) => { ev.preventDefault(); els.get(into)?.scrollIntoView({ block: 'center' }); } }, `#${into}`)),
          e?.replace ? shadowGroup(e) : null));
    }
    const isReplacement = e?.replace !== undefined;
    const cls = ['entry', `role-${role}`];
    if (isReplacement) cls.push('replacement', e!.type === 'tool/result' ? 'pruned' : 'compaction');
    const body: HTMLElement[] = [];
    if (isReplacement && e) {
      const n = e.shadowed?.length ?? 0;
      body.push(h('div', { class: 'replaces' },
        h('span', { class: 'badge' }, replacementKind(e)),
        h('span', {}, ` replaces ${n} event${n === 1 ? '' : 's'} (seq ${e.replace!.start}–${e.replace!.end})`)));
    }
    if (m) body.push(h('div', { class: 'content' }, renderContent(m['content'], resultLookup)));
    else body.push(h('div', { class: 'content muted' }, '(contributes no message to the model)'));
    if (isReplacement && e) body.push(shadowGroup(e));
    return h('article', { class: cls.join(' '), 'data-seq': seq, id: `entry-${seq}`, ...sizeAttrs },
      h('div', { class: 'gutter' },
        h('span', { class: 'seq', title: `seq ${seq}` }, `#${seq}`),
        e ? h('span', { class: 'time' }, when(e.time).slice(11)) : null,
        size),
      h('div', { class: 'bubble' },
        h('div', { class: 'meta' },
          h('span', { class: 'role' }, role),
          m ? h('span', { class: 'source' }, sourceLine(m)) : null,
          h('span', { class: 'type' }, e?.type ?? '')),
        ...body),
    );
  }

  /**
   * The model view is paged: the newest WINDOW entries are on the page, earlier ones behind a
   * "show earlier" bar (a 10,000-entry session paints as fast as a 500-entry one). `shownFrom` is
   * the surface index of the first entry on the page (live view).
   */
  const shown = { from: 0 };
  const earlierBar = h('div', { class: 'earlier', id: 'surface-earlier' });

  function updateEarlierBar(hidden: number, showMore: (n: number) => void): void {
    if (hidden <= 0) {
      earlierBar.remove();
      return;
    }
    earlierBar.replaceChildren(
      h('span', {}, `${hidden.toLocaleString('en')} earlier entr${hidden === 1 ? 'y' : 'ies'} not shown`),
      h('button', { type: 'button', id: 'show-earlier', onclick: () => showMore(WINDOW) }, `Show ${Math.min(WINDOW, hidden)} earlier`),
      h('button', { type: 'button', id: 'show-all', onclick: () => showMore(hidden) }, 'Show all'),
    );
    if (earlierBar.parentNode !== surfaceBox) surfaceBox.prepend(earlierBar);
  }

  /**
   * Renders `seqs[state.from..]` (entries built by `make`; `state.from` = the newest WINDOW) with
   * the earlier-entries bar; returns the bar's "show more" action.
   */
  function renderWindow(seqs: readonly number[], make: (seq: number) => HTMLElement, state: { from: number }): (n: number) => void {
    state.from = Math.max(0, seqs.length - WINDOW);
    const frag = document.createDocumentFragment();
    for (let i = state.from; i < seqs.length; i++) frag.append(make(seqs[i] as number));
    surfaceBox.replaceChildren(frag);
    const more = (n: number): void => {
      const to = state.from;
      state.from = Math.max(0, state.from - n);
      const f = document.createDocumentFragment();
      for (let i = state.from; i < to; i++) f.append(make(seqs[i] as number));
      earlierBar.after(f);
      updateEarlierBar(state.from, more);
    };
    updateEarlierBar(state.from, more);
    return more;
  }
  let liveMore: (n: number) => void = () => undefined;

  function renderLiveModel(): void {
    els.clear();
    rendered = new Set(surface);
    updateTotals();
    liveMore = renderWindow(surface, (seq) => {
      const el = entryEl(seq);
      els.set(seq, el);
      return el;
    }, shown);
    if (surface.length === 0) surfaceBox.append(h('div', { class: 'empty', id: 'surface-empty' }, caughtUp ? 'The surface is empty.' : 'Loading…'));
    surfaceBox.dataset.mode = 'live';
    delete surfaceBox.dataset.asOf;
  }

  /** Re-renders the entries holding the calls of `resultEntry`'s tool results. */
  function rerenderCallsOf(resultEntry: Entry): void {
    if (!resultEntry.message) return;
    for (const r of toolResults(resultEntry.message)) {
      const cs = callSeq.get(r.callId);
      const el = cs === undefined ? undefined : els.get(cs);
      if (cs !== undefined && el) {
        const fresh = entryEl(cs);
        el.replaceWith(fresh);
        els.set(cs, fresh);
      }
    }
  }

  function indexEntry(e: Entry): void {
    if (!e.message) return;
    for (const b of (Array.isArray(e.message['content']) ? e.message['content'] : []) as MessageJson[]) {
      if (b?.['type'] === 'tool-call' && typeof b['id'] === 'string') callSeq.set(b['id'], e.seq);
    }
    for (const r of toolResults(e.message)) resultSeq.set(r.callId, e.seq);
  }

  // The model view renders from the first catch-up message on, so first paint does not wait for
  // a long catch-up. Once a catch-up has filled a window, the rest is applied to the state only
  // (`deferred`) and the newest WINDOW entries are rendered once, at caught_up.
  const liveRendered = (): boolean => view === 'model' && asOf === undefined && !deferred;
  let firstPainted = false;
  let deferred = false;

  function applyAppend(e: Entry): void {
    surface.push(e.seq);
    indexEntry(e);
    if (!liveRendered()) return;
    (rendered as Set<number>).add(e.seq);
    if (caughtUp) updateTotals();
    document.getElementById('surface-empty')?.remove();
    if (!firstPainted) {
      firstPainted = true;
      // For bench/viewer.bench.ts: the first entries are on screen after this frame.
      requestAnimationFrame(() => setTimeout(() => performance.mark('palimpsest:first-paint'), 0));
    }
    const el = entryEl(e.seq);
    els.set(e.seq, el);
    surfaceBox.append(el);
    rerenderCallsOf(e);
    if (!caughtUp && surface.length - shown.from >= WINDOW) {
      deferred = true;
      surfaceBox.append(h('div', { class: 'empty', id: 'surface-loading' }, 'Loading the rest of the session…'));
    }
    if (nearBottom) el.scrollIntoView({ block: 'end' });
  }

  function applyReplace(e: Entry): void {
    const shadowed = e.shadowed ?? [];
    const at = shadowed.length > 0 ? surface.indexOf(shadowed[0] as number) : -1;
    if (at < 0) surface.push(e.seq);
    else surface.splice(at, shadowed.length, e.seq);
    indexEntry(e);
    if (!liveRendered()) return;
    for (const q of shadowed) (rendered as Set<number>).delete(q);
    (rendered as Set<number>).add(e.seq);
    if (caughtUp) updateTotals();
    if (at >= 0 && at + shadowed.length <= shown.from) {
      // Entirely among the earlier entries that are not on the page.
      shown.from -= shadowed.length - 1;
      updateEarlierBar(shown.from, liveMore);
      return;
    }
    const firstShown = shadowed.map((q) => els.get(q)).find((x) => x !== undefined);
    const el = entryEl(e.seq);
    if (firstShown) firstShown.before(el);
    else surfaceBox.append(el);
    for (const q of shadowed) {
      els.get(q)?.remove();
      els.delete(q);
    }
    if (at >= 0 && at < shown.from) {
      shown.from = at;
      updateEarlierBar(shown.from, liveMore);
    }
    els.set(e.seq, el);
    rerenderCallsOf(e);
  }

  let nearBottom = false;
  window.addEventListener('scroll', onScroll, { passive: true });
  function onScroll(): void {
    nearBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
  }

  // ---- the stream -------------------------------------------------------------------------
  function setLive(state: string, text: string): void {
    live.dataset.state = state;
    live.textContent = text;
  }

  function sizes(message: MessageJson | undefined): { message: MessageJson | undefined; bytes: number; tokens: number } {
    if (!message) return { message, bytes: 0, tokens: 0 };
    // Read with blob_refs: counted as the message with its bytes (each reference's size).
    const more = refInflation(message);
    return { message, bytes: utf8.encode(JSON.stringify(message)).length + more, tokens: estimateMessageTokens(message as never) + Math.ceil(more / 4) };
  }

  /** The surface's totals (what the model is sent), in the header. */
  function updateTotals(): void {
    let bytes = 0;
    let tokens = 0;
    for (const q of surface) {
      const e = entries.get(q);
      bytes += e?.bytes ?? 0;
      tokens += e?.tokens ?? 0;
    }
    totals.dataset.bytes = String(bytes);
    totals.dataset.tokens = String(tokens);
    totals.textContent = `surface ${formatBytes(bytes)} · ≈${tokens.toLocaleString('en')} tokens`;
  }

  function seen(ev: SessionEvent | undefined, message: string | undefined, replace?: { start: bigint; end: bigint; shadowedSeqs: bigint[] }): Entry {
    const seq = Number(ev?.seq ?? 0n);
    const e: Entry = {
      seq,
      type: ev?.type ?? '',
      time: Number(ev?.time ?? 0n),
      ...sizes(parseMessage(message)),
      ...(replace ? { replace: { start: Number(replace.start), end: Number(replace.end) }, shadowed: replace.shadowedSeqs.map(Number) } : {}),
    };
    entries.set(seq, e);
    return e;
  }

  function advance(c: bigint | undefined): void {
    if (c === undefined) return;
    cursor = c;
    if (Number(c) > head) {
      head = Number(c);
      const atNow = asOf === undefined;
      slider.max = String(head);
      if (atNow) slider.value = String(head);
      slider.disabled = false;
      updateSliderLabel();
      updateTurnButtons();
    }
  }

  async function follow(): Promise<void> {
    let backoff = 250;
    while (!gone) {
      try {
        setLive(caughtUp ? 'resuming' : 'connecting', caughtUp ? 'resuming…' : 'catching up…');
        const stream = api.subscribeSurface({ sessionId: id, includeMessages: true, blobRefs: true, ...(cursor === undefined ? {} : { afterSeq: cursor }) }, { signal: ac.signal });
        for await (const r of stream) {
          backoff = 250;
          switch (r.kind.case) {
            case 'append':
              applyAppend(seen(r.event, r.message?.messageJson));
              break;
            case 'replace':
              applyReplace(seen(r.event, r.message?.messageJson, r.kind.value));
              break;
            case 'caughtUp':
              if (!caughtUp) {
                caughtUp = true;
                if (view === 'model' && asOf === undefined && (deferred || surface.length === 0)) {
                  deferred = false;
                  renderLiveModel();
                }
                deferred = false;
                updateTotals();
                // A long session opens at its newest entries (and follows new ones from there).
                if (view === 'model' && asOf === undefined) {
                  window.scrollTo(0, document.body.scrollHeight);
                  nearBottom = true;
                  surfaceBox.dataset.scrolled = 'newest';
                  if (target !== undefined) {
                    nearBottom = false;
                    if (revealSeq(surfaceBox, target, () => liveMore(shown.from))) surfaceBox.dataset.scrolled = 'target';
                    target = undefined;
                  }
                }
                // For bench/viewer.bench.ts: when the whole surface was first put on the page.
                performance.mark('palimpsest:surface-rendered', { detail: { entries: surface.length } });
              }
              setLive('live', 'live');
              refreshHeaderSoon();
              break;
            default:
              break;
          }
          advance(r.cursor);
          if (caughtUp && (r.kind.case === 'append' || r.kind.case === 'replace')) {
            refreshHeaderSoon();
            updateSliderLabel();
          }
        }
        // The server ended the stream without an error (it does not, but resume anyway).
      } catch (e) {
        if (gone || isCancel(e)) return;
        if (isPermanent(e)) {
          const ce = ConnectError.from(e);
          setLive('ended', ce.code === Code.NotFound ? 'session not found' : 'stopped');
          showError(e, 'Following the session');
          if (!caughtUp) surfaceBox.replaceChildren(h('div', { class: 'empty' }, 'Nothing to show.'));
          return;
        }
        setLive('reconnecting', `reconnecting in ${Math.round(backoff / 100) / 10}s…`);
      }
      await new Promise((r) => setTimeout(r, backoff));
      backoff = Math.min(backoff * 2, 5000);
    }
  }

  // ---- time slider ------------------------------------------------------------------------
  function timeOf(seq: number): string {
    for (let s = seq; s >= 0 && s > seq - 10_000; s--) {
      const e = entries.get(s);
      if (e) return when(e.time);
    }
    return '';
  }

  function updateSliderLabel(): void {
    sliderLabel.textContent = asOf === undefined ? `now · seq ${head < 0 ? '—' : head}` : `as of seq ${asOf} · ${timeOf(asOf)}`;
  }

  let sliderTimer: ReturnType<typeof setTimeout> | undefined;
  let asOfRequest = 0;
  slider.addEventListener('input', () => {
    clearTimeout(sliderTimer);
    sliderTimer = setTimeout(() => void goTo(Number(slider.value) >= head ? undefined : Number(slider.value)), 120);
  });
  nowButton.addEventListener('click', () => {
    slider.value = String(head);
    void goTo(undefined);
  });

  async function goTo(seq: number | undefined): Promise<void> {
    asOf = seq;
    nowButton.disabled = seq === undefined;
    updateSliderLabel();
    updateTurnButtons();
    if (seq === undefined) {
      asOfBanner.hidden = true;
      if (view === 'model') renderLiveModel();
      else select(view);
      return;
    }
    asOfBanner.hidden = false;
    asOfBanner.replaceChildren(h('span', {}, `Showing the session as it was right after seq ${seq}. Live changes keep arriving; `),
      h('button', { type: 'button', class: 'link', onclick: () => nowButton.click() }, 'back to now'));
    if (view === 'model') await renderAsOf(seq);
    else select(view);
  }

  async function renderAsOf(seq: number): Promise<void> {
    const mine = ++asOfRequest;
    try {
      const [s, m] = await Promise.all([
        api.getSurface({ sessionId: id, asOfSeq: BigInt(seq) }, { signal: ac.signal }),
        api.getMessages({ sessionId: id, view: MessageView.MODEL_HISTORY, asOfSeq: BigInt(seq), blobRefs: true }, { signal: ac.signal }),
      ]);
      if (gone || mine !== asOfRequest || asOf !== seq || view !== 'model') return;
      const bySeq = new Map(m.messages.map((x) => [Number(x.seq), parseMessage(x.messageJson)] as const));
      els.clear();
      rendered = new Set(s.seqs.map(Number));
      renderWindow(s.seqs.map(Number), (q) => entryEl(q, bySeq.get(q)), { from: 0 });
      surfaceBox.dataset.mode = 'as-of';
      surfaceBox.dataset.asOf = String(seq);
    } catch (e) {
      if (!gone && !isCancel(e)) showError(e, `Reading the session as of seq ${seq}`);
    }
  }

  let following = false;
  function select(v: View): void {
    view = v;
    if (v === 'model' && !following) {
      following = true;
      void follow();
    }
    for (const b of tabs.querySelectorAll('button')) b.setAttribute('aria-selected', String(b.getAttribute('data-view') === v));
    if (v === 'model') {
      content.replaceChildren(surfaceBox);
      if (asOf !== undefined) void renderAsOf(asOf);
      else renderLiveModel();
    } else {
      const onSurfaceNow = new Set(surface);
      const ctx: ViewContext = { id, signal: ac.signal, asOf, onSurface: (q) => onSurfaceNow.has(q), results: resultLookup, alive: () => !gone };
      content.replaceChildren(v === 'transcript' ? transcriptView(ctx) : eventsView(ctx));
    }
  }

  // `?view=events` (or transcript) opens that view; the surface stream (which carries every
  // message's full data, images included) starts only once the model view is shown.
  const asked = new URLSearchParams(location.search).get('view');
  select(asked === 'events' || asked === 'transcript' ? asked : 'model');
  if (!following) setLive('idle', 'not following: open Model history for live updates');
  updateSliderLabel();
  void loadHeader();
  void loadTurns();
  return () => {
    gone = true;
    ac.abort();
    clearTimeout(headerTimer);
    clearTimeout(sliderTimer);
    window.removeEventListener('scroll', onScroll);
  };
}
