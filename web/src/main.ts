/**
 * The session viewer: `/` lists sessions, `/sessions/<id>` shows one. History-API routing, a
 * token field for servers with --auth-tokens, and one error banner that says what went wrong
 * in words, with the server's reason.
 */
import './style.css';
import { setToken, token } from './api.js';
import { showError, type Page } from './ui.js';
import { listPage } from './list-page.js';
import { sessionPage } from './session-page.js';

const app = document.getElementById('app') as HTMLElement;
let teardown: Page | undefined;

/** Navigates within the viewer. */
export function navigate(path: string): void {
  history.pushState(null, '', path);
  route();
}

function route(): void {
  teardown?.();
  teardown = undefined;
  showError(undefined);
  app.replaceChildren();
  const m = /^\/sessions\/([^/]+)\/?$/.exec(location.pathname);
  teardown = m ? sessionPage(app, decodeURIComponent(m[1] as string)) : listPage(app);
}

document.addEventListener('click', (ev) => {
  const a = (ev.target as Element).closest('a[data-link]');
  if (!a || ev.defaultPrevented || (ev as MouseEvent).button !== 0 || (ev as MouseEvent).metaKey || (ev as MouseEvent).ctrlKey) return;
  ev.preventDefault();
  navigate((a as HTMLAnchorElement).getAttribute('href') ?? '/');
});
window.addEventListener('popstate', route);

const form = document.getElementById('token-form') as HTMLFormElement;
const input = document.getElementById('token') as HTMLInputElement;
input.value = token();
form.addEventListener('submit', (ev) => {
  ev.preventDefault();
  setToken(input.value.trim());
  route();
});
(document.getElementById('token-clear') as HTMLButtonElement).addEventListener('click', () => {
  input.value = '';
  setToken('');
  route();
});

route();
