/**
 * The TypeScript client's search (issue #40 item 4) against a real server: hits across sessions
 * with their snippets cut at the matches (code points: an emoji before the match does not shift
 * it), every filter of SearchEventsRequest, pages followed by the generator (and one page at a
 * time), and a malformed query surfacing as INVALID_ARGUMENT / SEARCH_QUERY_INVALID with its
 * position.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PalimpsestClient, PalimpsestError, events as ev, snippetParts, type SearchHit, type SearchOptions } from '../../clients/typescript/src/index.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

describe('@palimpsest/client search', () => {
  let ts: TestServer;
  let c: PalimpsestClient;
  const all = async (query: string, opts: SearchOptions = {}): Promise<SearchHit[]> => {
    const out: SearchHit[] = [];
    for await (const hit of c.search(query, opts)) out.push(hit);
    return out;
  };
  const where = (hits: readonly SearchHit[]): string[] => hits.map((x) => `${x.sessionId}#${x.seq}`);

  beforeAll(async () => {
    ts = await startTestServer();
    c = new PalimpsestClient(ts.server.address);
    await c.createSession('ts-search-red', { labels: { team: 'red' } });
    await c.append('ts-search-red', [
      ev.userMessage('Please ship invoice 4711 to production'),
      ev.assistantMessage('Deploying it now.', { turn: 1, step: 1, provider: 'p', model: 'm', toolCalls: [{ id: 'c1', name: 'deploy', arguments: '{"invoice":4711}' }] }),
      ev.toolResult('c1', 'deploy failed: invoice 4711 is locked', { turn: 1, step: 1, callSeq: 1 }),
    ]);
    await c.createSession('ts-search-blue', { labels: { team: 'blue' } });
    await c.append('ts-search-blue', [ev.userMessage('🙂 where is invoice 4711 now?')]);
  });
  afterAll(async () => {
    c?.close();
    await ts?.stop();
  });

  it('finds the events of every session, newest first, with the snippet cut at the matches', async () => {
    const hits = await all('"invoice 4711"');
    expect(where(hits)).toEqual(['ts-search-blue#0', 'ts-search-red#2', 'ts-search-red#1', 'ts-search-red#0']);
    const blue = hits[0]!;
    expect(blue.type).toBe('user/message');
    expect(Math.abs(blue.time - Date.now())).toBeLessThan(60_000);
    // The emoji is one code point (two UTF-16 units): the mark still lands on the phrase.
    expect(snippetParts(blue)).toEqual([
      { text: '🙂 where is ', match: false }, { text: 'invoice 4711', match: true }, { text: ' now?', match: false },
    ]);
    expect(snippetParts(blue).map((p) => p.text).join('')).toBe(blue.snippet);
    // Nothing matches: no hits, no error.
    expect(await all('"invoice 4712"')).toEqual([]);
  });

  it('applies each filter of the request', async () => {
    expect(where(await all('4711', { labels: { team: 'blue' } }))).toEqual(['ts-search-blue#0']);
    expect(where(await all('4711', { sessionIds: ['ts-search-red'] }))).toEqual(['ts-search-red#2', 'ts-search-red#1', 'ts-search-red#0']);
    expect(where(await all('4711', { eventTypes: ['tool/result'] }))).toEqual(['ts-search-red#2']);
    expect(where(await all('4711', { toolName: 'deploy' }))).toEqual(['ts-search-red#2', 'ts-search-red#1']);
    const t = (await all('4711', { sessionIds: ['ts-search-blue'] }))[0]!.time;
    expect(where(await all('4711', { startTime: new Date(t + 1) }))).toEqual([]);
    expect(where(await all('4711', { sessionIds: ['ts-search-blue'], startTime: t, endTime: t + 1 }))).toEqual(['ts-search-blue#0']);
    expect(where(await all('4711', { sessionIds: ['ts-search-red'], surfaceOnly: true, order: 'score' })).sort()).toEqual(['ts-search-red#0', 'ts-search-red#1', 'ts-search-red#2']);
    expect(where(await all('4711', { sessionIds: ['ts-search-red'], includeShadowed: true }))).toHaveLength(3);
    // The query's own fields narrow the same way.
    expect(where(await all('4711 label:team=red type:user/message'))).toEqual(['ts-search-red#0']);
  });

  it('follows the pages one at a time, and the generator reads them all', async () => {
    const first = await c.searchPage('4711', { pageSize: 3 });
    expect(where(first.hits)).toEqual(['ts-search-blue#0', 'ts-search-red#2', 'ts-search-red#1']);
    expect(first.nextPageToken).not.toBe('');
    const second = await c.searchPage('4711', { pageSize: 3 }, first.nextPageToken);
    expect(where(second.hits)).toEqual(['ts-search-red#0']);
    expect(second.nextPageToken).toBe('');
    expect(where(await all('4711', { pageSize: 1 }))).toEqual([...where(first.hits), ...where(second.hits)]);
    // Stopping early asks for no more pages than were read.
    const seen: SearchHit[] = [];
    for await (const hit of c.search('4711', { pageSize: 1 })) {
      seen.push(hit);
      if (seen.length === 2) break;
    }
    expect(where(seen)).toEqual(['ts-search-blue#0', 'ts-search-red#2']);
  });

  it('snippetParts clamps ranges out of order, overlapping or past the end, and always joins back to the snippet', () => {
    const hit = { snippet: 'a🙂bc de', matches: [{ start: 5, end: 99 }, { start: 1, end: 3 }, { start: 2, end: 4 }] };
    expect(snippetParts(hit)).toEqual([
      { text: 'a', match: false }, { text: '🙂b', match: true }, { text: 'c', match: true }, { text: ' ', match: false }, { text: 'de', match: true },
    ]);
    expect(snippetParts({ snippet: 'plain', matches: [] })).toEqual([{ text: 'plain', match: false }]);
  });

  it('a malformed query is INVALID_ARGUMENT / SEARCH_QUERY_INVALID naming its position', async () => {
    const err = await all('deploy fo*o').then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(PalimpsestError);
    const e = err as PalimpsestError;
    expect([e.code, e.reason, e.metadata['position']]).toEqual(['INVALID_ARGUMENT', 'SEARCH_QUERY_INVALID', '9']);
    expect(e.detail).toContain('position 9');
    // A bad filter is refused too, with its own reason.
    const bad = await c.searchPage('4711', { surfaceOnly: true, includeShadowed: true }).then(() => undefined, (x: unknown) => x as PalimpsestError);
    expect([bad?.code, bad?.reason]).toEqual(['INVALID_ARGUMENT', 'SEARCH_REQUEST_INVALID']);
    await expect(c.search('4711', { order: 'best' as never }).next()).rejects.toThrow(/unknown order "best"/);
  });
});
