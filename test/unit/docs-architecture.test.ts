/**
 * docs/architecture.md walks one request through the files it passes: every repository path it
 * names (in code spans and links) must exist, so a file that moves or goes takes the page with it.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, expect, it } from 'vitest';
import { codeSpans, linkTargets, section } from '../support/markdown.js';

const ROOT = join(import.meta.dirname, '..', '..');
const DOC = 'docs/architecture.md';
const TEXT = readFileSync(join(ROOT, DOC), 'utf8');
const WALK = 'One request, from the wire to the store and back';

/** Top-level folders and files whose paths a doc names as repository paths. */
const REPO_PATH = /^(?:src|test|proto|gen|docs|bench|clients|scripts|web|sqlite-ext|bin|\.ci)\/[\w./-]*$|^(?:package\.json|eslint\.config\.js|vitest\.config\.ts|tsconfig[\w.]*\.json|buf(?:\.gen)?\.yaml)$/;

/** The repository paths a Markdown text names: code spans that are paths, and relative links (resolved from `docFile`). */
export function namedPaths(md: string, docFile: string): string[] {
  const out = new Set<string>();
  for (const span of codeSpans(md)) {
    const p = span.replace(/[.,;:]+$/, '');
    if (REPO_PATH.test(p)) out.add(p.replace(/\/$/, ''));
  }
  for (const target of linkTargets(md)) {
    if (/^[a-z]+:/i.test(target) || target.startsWith('#')) continue;
    out.add(normalize(join(dirname(docFile), target.split('#')[0]!)).replace(/\/$/, ''));
  }
  return [...out];
}

describe(DOC, () => {
  it('every file and folder it names exists', () => {
    const missing = namedPaths(TEXT, DOC).filter((p) => !existsSync(join(ROOT, p)));
    expect(missing, `${DOC} names paths that do not exist: update the page`).toEqual([]);
  });

  it('the request walk names the files of every layer a request passes', () => {
    const walk = namedPaths(section(TEXT, WALK), DOC);
    for (const layer of ['src/cli/', 'src/server/', 'src/app/', 'src/domain/', 'src/store/sqlite/', 'gen/']) {
      expect(walk.filter((p) => p.startsWith(layer)).length, `the walk names no file under ${layer}`).toBeGreaterThan(0);
    }
    expect(walk.filter((p) => p.startsWith('src/')).length).toBeGreaterThanOrEqual(30);
  });

  it('reports a named path that does not exist', () => {
    const md = 'The handler is in `src/server/handlers.ts`, then `src/server/no-such-file.ts` and [here](../src/nowhere.ts); `user/message` is a type.';
    const named = namedPaths(md, DOC);
    expect(named.sort()).toEqual(['src/nowhere.ts', 'src/server/handlers.ts', 'src/server/no-such-file.ts']);
    expect(named.filter((p) => !existsSync(join(ROOT, p))).sort()).toEqual(['src/nowhere.ts', 'src/server/no-such-file.ts']);
  });
});
