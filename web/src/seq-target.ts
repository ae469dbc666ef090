/**
 * `/sessions/<id>?seq=<n>` (a search hit's link): once the model view has caught up, the event
 * with seq n is highlighted and scrolled into view. It may be an entry of the surface, a tool
 * result folded into its call (the call is highlighted too), an event shadowed underneath a
 * replacement (its group is opened), or older than the entries on the page (they are shown
 * first). An event the model view does not show at all is named in a note instead.
 */
import { h } from './dom.js';

/** The seq of `?seq=` in the page's URL, if it is one. */
export function targetSeq(search: string): number | undefined {
  const v = new URLSearchParams(search).get('seq');
  return v !== null && /^\d{1,15}$/.test(v) ? Number(v) : undefined;
}

/**
 * Highlights and scrolls to `seq` inside `box`; `showAll` puts every earlier entry on the page
 * (called only when the seq is not there yet). Returns the highlighted element, if any.
 */
export function revealSeq(box: HTMLElement, seq: number, showAll: () => void): HTMLElement | undefined {
  const find = (): HTMLElement | null => box.querySelector<HTMLElement>(`[data-seq="${seq}"]`);
  let el = find();
  if (!el) {
    showAll();
    el = find();
  }
  for (const old of box.querySelectorAll('.search-target, .search-target-part')) old.classList.remove('search-target', 'search-target-part');
  if (!el) {
    box.prepend(h('div', { class: 'empty search-target-missing', id: 'search-target-missing' },
      `Seq ${seq} is not in the model history; see the Event log.`));
    return undefined;
  }
  for (let d = el.parentElement?.closest('details'); d; d = d.parentElement?.closest('details')) d.open = true;
  el.classList.add('search-target');
  el.setAttribute('data-search-target', 'true');
  const into = el.getAttribute('data-folded-into');
  if (into !== null) {
    const call = box.querySelector(`[data-seq="${into}"]`);
    call?.classList.add('search-target');
    call?.querySelector(`[data-result-seq="${seq}"]`)?.classList.add('search-target-part');
  }
  el.scrollIntoView({ block: 'center' });
  return el;
}
