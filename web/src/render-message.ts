/**
 * One model-history message as people read it: role, text, reasoning folded, tool calls with
 * their results next to them, images as images (data: URLs only; nothing is fetched).
 */
import { h, type Child } from './dom.js';
import { blobImage, blobRef, blobText, typeLabel } from './blob-view.js';
import { formatBytes, refInflation } from './blob-ref.js';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Obj = { [k: string]: Json };

/** A model-history message (the JSON the server derives). */
export type MessageJson = Obj;

/** Where to find the result of a tool call (another surface entry). */
export interface ResultLookup {
  (callId: string): { seq: number; block: Obj; pruned?: { bytesBefore: number; bytesAfter: number } } | undefined;
}

/** UTF-8 bytes of the text a tool result carries (its inner blocks' text, else their JSON). */
export function resultBytes(block: Obj): number {
  const enc = new TextEncoder();
  let n = 0;
  for (const c of blocks(block['content'])) n += enc.encode(typeof c['text'] === 'string' ? c['text'] : JSON.stringify(c)).length + refInflation(c);
  return n;
}

function obj(v: Json | undefined): Obj | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? v : undefined;
}

function str(v: Json | undefined): string {
  return typeof v === 'string' ? v : '';
}

function blocks(v: Json | undefined): Obj[] {
  return Array.isArray(v) ? v.map(obj).filter((b): b is Obj => b !== undefined) : [];
}

function image(att: Obj | undefined): Child {
  if (!att) return h('span', { class: 'muted' }, '[image]');
  // Read with blob_refs: the image by reference, loaded when scrolled into view.
  const ref = blobRef(att['data']);
  if (ref) return blobImage(ref, str(att['name']) || 'image');
  const mime = str(att['mimeType']) || str(att['mediaType']) || str(att['type']) || 'image/png';
  const data = str(att['data']) || str(att['base64']);
  const url = str(att['url']);
  const src = data ? `data:${mime};base64,${data}` : url.startsWith('data:image/') ? url : '';
  if (!src) return h('span', { class: 'image-ref muted', title: url }, `[image ${str(att['name']) || url || ''}]`);
  const img = h('img', { class: 'image', src, alt: str(att['name']) || 'image', loading: 'lazy' });
  if (!data) return img;
  // Its type and size, as for an image by reference (blob-view.ts).
  const bytes = Math.floor(data.length * 3 / 4) - (data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0);
  return h('figure', { class: 'blob inline-image', 'data-bytes': bytes }, img, h('figcaption', { class: 'blob-label muted mono' }, `${typeLabel(mime)} · ${formatBytes(bytes)}`));
}

function prettyArgs(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** Text of a tool result at least this long (UTF-16 units) is shown collapsed, with its size. */
const LONG_TEXT = 64 * 1024;

/** A tool result's text; a long one collapsed to a line with its size, put on the page when opened. */
function longText(t: string): HTMLElement {
  if (t.length < LONG_TEXT) return h('pre', { class: 'result-text' }, t);
  const body = h('pre', { class: 'result-text blob-text-body' });
  const box = h('details', { class: 'blob blob-text long-text', 'data-bytes': new TextEncoder().encode(t).length },
    h('summary', { class: 'mono' }, h('span', { class: 'blob-label' }, `text · ${formatBytes(new TextEncoder().encode(t).length)}`),
      h('span', { class: 'muted' }, ` · ${t.slice(0, 80).replace(/\s+/g, ' ')}…`)),
    body);
  box.addEventListener('toggle', () => {
    if (box.open && body.textContent === '') body.textContent = t;
  });
  return box;
}

/** The inner content of a tool result, as text and images. */
export function resultContent(block: Obj): Child[] {
  return blocks(block['content']).map((b) => {
    if (b['type'] === 'text') {
      const ref = blobRef(b['text']);
      return ref ? blobText(ref) : longText(str(b['text']));
    }
    if (b['type'] === 'image') return image(obj(b['attachment']));
    return h('pre', { class: 'result-text muted' }, JSON.stringify(b));
  });
}

/** Renders the content blocks of a message. */
export function renderContent(content: Json | undefined, results?: ResultLookup): Child[] {
  return blocks(content).map((b) => {
    switch (b['type']) {
      case 'text':
        return h('div', { class: 'text' }, str(b['text']));
      case 'reasoning':
        return h('details', { class: 'reasoning' }, h('summary', {}, 'Reasoning'), h('div', { class: 'text' }, str(b['text'])));
      case 'image':
        return image(obj(b['attachment']));
      case 'tool-call': {
        const id = str(b['id']);
        const r = results?.(id);
        return h('div', { class: 'tool-call', 'data-call-id': id },
          h('div', { class: 'tool-head' }, h('span', { class: 'tool-icon' }, '⚙'), h('span', { class: 'tool-name' }, str(b['name'])), h('span', { class: 'muted mono' }, id)),
          h('pre', { class: 'tool-args' }, prettyArgs(str(b['arguments']))),
          r ? h('div', { class: `tool-result-inline${r.block['isError'] === true ? ' is-error' : ''}${r.pruned ? ' pruned' : ''}`, 'data-result-seq': r.seq },
            h('div', { class: 'tool-result-label' }, `result · seq ${r.seq}`,
              r.pruned ? h('span', {
                class: 'badge pruned-marker', 'data-pruned': 'true', 'data-bytes-before': r.pruned.bytesBefore, 'data-bytes-after': r.pruned.bytesAfter,
              }, `pruned: ${formatBytes(r.pruned.bytesBefore)} → ${formatBytes(r.pruned.bytesAfter)}, saved ${formatBytes(r.pruned.bytesBefore - r.pruned.bytesAfter)}`) : null),
            ...resultContent(r.block))
            : results ? h('div', { class: 'tool-result-inline pending muted' }, 'no result on the surface yet') : null,
        );
      }
      case 'tool-result':
        return h('div', { class: `tool-result${b['isError'] === true ? ' is-error' : ''}` },
          h('div', { class: 'tool-head' }, h('span', { class: 'tool-icon' }, '↩'), h('span', {}, 'result of '), h('span', { class: 'mono' }, str(b['toolCallId']))),
          ...resultContent(b));
      default:
        return h('pre', { class: 'unknown-block muted' }, JSON.stringify(b, null, 2));
    }
  });
}

/** A role label and a source line ("model deepseek-v4-flash", "plugin compact", "tool c1"). */
export function sourceLine(m: MessageJson): string {
  const s = obj(m['source']);
  if (!s) return '';
  const kind = str(s['kind']);
  if (kind === 'model') return [str(s['provider']), str(s['model'])].filter(Boolean).join(' · ');
  if (kind === 'plugin') return `plugin ${str(s['plugin'])}`;
  if (kind === 'tool') return `tool ${str(s['callId'])}`;
  return kind === 'user' ? '' : kind;
}

/** The tool-result blocks of a message, by call id. */
export function toolResults(m: MessageJson): { callId: string; block: Obj }[] {
  return blocks(m['content']).filter((b) => b['type'] === 'tool-result').map((b) => ({ callId: str(b['toolCallId']), block: b }));
}

/** A short plain-text preview of a message (for shadowed rows and titles). */
export function preview(m: MessageJson | undefined, max = 140): string {
  if (!m) return '';
  const parts: string[] = [];
  for (const b of blocks(m['content'])) {
    if (b['type'] === 'text' || b['type'] === 'reasoning') parts.push(str(b['text']));
    else if (b['type'] === 'tool-call') parts.push(`${str(b['name'])}(${str(b['arguments'])})`);
    else if (b['type'] === 'tool-result') parts.push(blocks(b['content']).map((c) => str(c['text'])).join(' '));
    else if (b['type'] === 'image') parts.push('[image]');
  }
  const t = parts.join(' ').replace(/\s+/g, ' ').trim();
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

/** A message's JSON text (DerivedMessage.message_json) as an object; undefined when absent or not JSON. */
export function parseMessage(text: string | undefined): MessageJson | undefined {
  if (!text) return undefined;
  try {
    return JSON.parse(text) as MessageJson;
  } catch {
    return undefined;
  }
}
