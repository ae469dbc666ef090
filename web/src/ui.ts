/** The page chrome shared by the pages: error banner and breadcrumbs. */
import { failure } from './api.js';
import { append, h } from './dom.js';

const errorBox = document.getElementById('error') as HTMLElement;
const crumbs = document.getElementById('crumbs') as HTMLElement;

/** What a page returns: a teardown run when the route changes. */
export type Page = () => void;


/** Shows an error (or clears it with undefined). */
export function showError(e: unknown, what?: string): void {
  if (e === undefined) {
    errorBox.hidden = true;
    errorBox.replaceChildren();
    return;
  }
  const f = failure(e);
  const hint = f.code === 'Unauthenticated' ? 'Enter a valid bearer token in the Token field above.'
    : f.code === 'PermissionDenied' ? 'This token lacks the permission; use another token.'
      : f.code === 'Unavailable' || f.code === 'Unknown' ? 'Is the server running? The viewer retries live streams by itself.' : '';
  errorBox.replaceChildren();
  append(errorBox, [
    h('strong', {}, what ? `${what}: ` : ''),
    h('span', { class: 'code' }, f.code),
    f.reason ? h('span', { class: 'reason', 'data-reason': f.reason }, f.reason) : null,
    h('span', { class: 'message' }, f.message),
    hint ? h('span', { class: 'hint' }, hint) : null,
    h('button', { type: 'button', class: 'dismiss', onclick: () => showError(undefined) }, '×'),
  ]);
  errorBox.hidden = false;
}

/** Sets the breadcrumb trail. */
export function setCrumbs(...parts: (Node | string)[]): void {
  crumbs.replaceChildren(...parts);
}

