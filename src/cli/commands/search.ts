/**
 * `palimpsest search QUERY`: SearchEvents (issue #40) across the caller's sessions, newest first.
 */
import { SearchOrder, type SearchHit } from '../../../gen/palimpsest/v1/service.js';
import { UsageError } from '../args.js';
import { paginate, type Command } from '../command.js';
import { formatTable } from '../output.js';

/** The snippet with its matches between « and » (the CLI's marks; the RPC carries ranges). */
export function markedSnippet(h: SearchHit): string {
  const chars = [...h.snippet];
  let out = '';
  let at = 0;
  for (const m of h.matches) {
    out += chars.slice(at, m.start).join('') + '«' + chars.slice(m.start, m.end).join('') + '»';
    at = m.end;
  }
  return out + chars.slice(at).join('');
}

const search: Command = {
  name: 'search',
  summary: "Searches the text of the sessions' messages (words, \"phrases\", -exclude, prefix*, type: tool: label:k=v session:).",
  positionals: [{ name: 'QUERY' }],
  options: {
    limit: { type: 'string', value: 'N', help: 'print at most N hits (default 20)' },
    label: { type: 'string', multiple: true, value: 'KEY=VALUE', help: 'only sessions carrying this label (repeatable; all must match)' },
    session: { type: 'string', multiple: true, value: 'ID', help: 'only this session (repeatable)' },
    type: { type: 'string', multiple: true, value: 'TYPE', help: 'only this event type (repeatable)' },
    tool: { type: 'string', value: 'NAME', help: 'only events calling tool NAME or answering a call to it' },
    'surface-only': { type: 'boolean', help: 'only what the model still sees (the current surface)' },
    'include-shadowed': { type: 'boolean', help: 'also events a replace took off the surface (compacted or pruned)' },
    'by-score': { type: 'boolean', help: 'best match first instead of newest first' },
  },
  examples: ['palimpsest search \'"rm -rf"\'', 'palimpsest search "invoice 4711" --limit 5 --json', "palimpsest search 'tool:deploy type:tool/result failed'"],
  async run({ args, rpc, out }) {
    const limit = args.int('limit', 1) ?? 20;
    const query = args.pos(0);
    if (query.trim() === '') throw new UsageError('QUERY is empty; give a word, a "phrase" or a field such as type:user/message');
    const hits: SearchHit[] = [];
    await paginate(limit, async (pageSize, pageToken) => {
      const r = await rpc.unary(rpc.client.searchEvents, {
        query, pageSize, pageToken, labelSelector: args.labels(), sessionIds: args.list('session'), eventTypes: args.list('type'),
        startTime: undefined, endTime: undefined, toolName: args.str('tool') ?? '', surfaceOnly: args.flag('surface-only'),
        includeShadowed: args.flag('include-shadowed'), order: args.flag('by-score') ? SearchOrder.SEARCH_ORDER_SCORE : SearchOrder.SEARCH_ORDER_NEWEST,
      });
      return { items: r.hits, nextPageToken: r.nextPageToken };
    }, async (items) => { hits.push(...items); });
    if (out.json) {
      await out.printJson(hits.map((h) => ({ sessionId: h.sessionId, seq: h.seq, type: h.type, time: new Date(h.time).toISOString(), snippet: h.snippet, matches: h.matches, score: h.score })));
    } else if (hits.length === 0) await out.write(out.style.dim('no hits\n'));
    else {
      await out.write(formatTable(
        ['SESSION', 'SEQ', 'TYPE', 'TIME', 'SNIPPET'],
        hits.map((h) => [h.sessionId, String(h.seq), h.type, new Date(h.time).toISOString(), markedSnippet(h)]),
        out.style,
      ));
    }
  },
};

/** The search command. */
export const SEARCH_COMMANDS: readonly Command[] = [search];
