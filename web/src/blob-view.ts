/**
 * Blob references in the viewer (issue #39, docs/blobs.md): a value read with `blob_refs` is
 * `{"$blob": "sha256:…", "bytes": N, "mediaType": …}`. Images are shown by reference and loaded
 * only when scrolled near (the web port's `GET /blobs/<digest>`: with no token a plain lazy
 * `<img>`, the browser's cache keeping it; with the tab's token, fetched with it into an object
 * URL); every blob shows its type and size ("PNG · 1.0 MiB"); a large text is a collapsed line
 * with its size, loaded on demand.
 */
import { token } from './api.js';
import { h } from './dom.js';
import { blobRef, formatBytes, type BlobRef } from './blob-ref.js';

export { blobRef, type BlobRef };

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** Every reference in `v`, in document order. */
export function blobRefsIn(v: Json | undefined, out: BlobRef[] = []): BlobRef[] {
  if (typeof v !== 'object' || v === null) return out;
  const ref = blobRef(v);
  if (ref) out.push(ref);
  else if (Array.isArray(v)) for (const x of v) blobRefsIn(x, out);
  else for (const x of Object.values(v)) blobRefsIn(x, out);
  return out;
}

/** "PNG", "JPEG", "text", ... of a media type. */
export function typeLabel(mediaType: string): string {
  const essence = (mediaType.split(';', 1)[0] ?? '').trim().toLowerCase();
  if (essence.startsWith('text/')) return 'text';
  const sub = essence.split('/')[1] ?? essence;
  return (sub.replace(/^(x-|vnd\.)/, '').split(/[+.]/)[0] ?? sub).toUpperCase();
}

/** "PNG · 1.0 MiB". */
export function blobLabel(ref: BlobRef): string {
  return `${typeLabel(ref.mediaType)} · ${formatBytes(ref.bytes)}`;
}

const url = (ref: BlobRef): string => `/blobs/${ref.digest}`;

/** The blob's bytes, with the tab's token. */
async function fetchBlob(ref: BlobRef): Promise<Response> {
  const t = token();
  const r = await fetch(url(ref), t ? { headers: { authorization: `Bearer ${t}` } } : {});
  if (!r.ok) throw new Error(`blob ${ref.digest.slice(0, 19)}…: HTTP ${r.status}`);
  return r;
}

/** Loads images fetched with the token when they come near the viewport. */
let observer: IntersectionObserver | undefined;
const pending = new WeakMap<Element, BlobRef>();

function observe(img: HTMLImageElement, ref: BlobRef): void {
  observer ??= new IntersectionObserver((entries) => {
    for (const e of entries) {
      if (!e.isIntersecting) continue;
      const el = e.target as HTMLImageElement;
      observer?.unobserve(el);
      const r = pending.get(el);
      if (!r) continue;
      void fetchBlob(r).then((res) => res.blob()).then((b) => {
        el.src = URL.createObjectURL(b);
      }).catch((err: unknown) => {
        el.replaceWith(h('span', { class: 'blob-error muted' }, `[image not loaded: ${(err as Error).message}]`));
      });
    }
  }, { rootMargin: '400px 0px' });
  pending.set(img, ref);
  observer.observe(img);
}

/** An image by reference, loaded lazily, with its type and size. */
export function blobImage(ref: BlobRef, alt = 'image'): HTMLElement {
  const img = h('img', { class: 'image blob-image', alt, loading: 'lazy', decoding: 'async', 'data-blob': ref.digest });
  if (token()) observe(img, ref);
  else img.src = url(ref);
  return h('figure', { class: 'blob', 'data-blob': ref.digest, 'data-bytes': ref.bytes },
    img, h('figcaption', { class: 'blob-label muted mono' }, blobLabel(ref)));
}

/** A large text by reference: a collapsed line with its size; opening it loads the text. */
export function blobText(ref: BlobRef): HTMLElement {
  const body = h('pre', { class: 'result-text blob-text-body' });
  const box = h('details', { class: 'blob blob-text', 'data-blob': ref.digest, 'data-bytes': ref.bytes },
    h('summary', { class: 'mono' }, h('span', { class: 'blob-label' }, blobLabel(ref)), h('span', { class: 'muted' }, ' · not loaded: open to load it')),
    body);
  let loaded = false;
  box.addEventListener('toggle', () => {
    if (!box.open || loaded) return;
    loaded = true;
    body.textContent = 'loading…';
    void fetchBlob(ref).then((r) => r.text()).then((t) => {
      body.textContent = t;
      box.dataset.loaded = 'true';
      box.querySelector('summary .muted')!.textContent = '';
    }).catch((err: unknown) => {
      loaded = false;
      body.textContent = (err as Error).message;
    });
  });
  return box;
}

/** A reference as its view: an image, or a collapsed text. */
export function blobView(ref: BlobRef): HTMLElement {
  return ref.mediaType.startsWith('image/') ? blobImage(ref) : blobText(ref);
}
