/**
 * Session commands: create, get, sessions (list), delete, fork.
 */
import { UsageError, type OptionSpec } from '../args.js';
import type { Rpc } from '../client.js';
import { DataFormat, Direction } from '../../../gen/palimpsest/v1/service.js';
import { paginate, type Command, type CommandContext } from '../command.js';
import { formatTable } from '../output.js';
import { SESSION_COLUMNS, sessionDetails, sessionObject, sessionRow } from '../format.js';
import type { Session } from '../../../gen/palimpsest/v1/session.js';
import { olderThan, parseAge } from '../older-than.js';
import { watchSessions } from './sessions-watch.js';

const label: OptionSpec = { type: 'string', multiple: true, value: 'KEY=VALUE', help: 'label to attach (repeatable)' };

/** Prints a created session: its id, or `{"id": ...}` with --json. */
export async function printId(ctx: CommandContext, session: Session | undefined): Promise<void> {
  const id = session?.id ?? '';
  if (ctx.out.json) await ctx.out.printJson({ id });
  else await ctx.out.write(id + '\n');
}

const create: Command = {
  name: 'create',
  summary: 'Creates an empty session and prints its id.',
  positionals: [],
  options: {
    id: { type: 'string', value: 'ID', help: 'session id (1-128 of [A-Za-z0-9._:-]; default a generated UUID)' },
    label,
    cwd: { type: 'string', value: 'DIR', help: 'header cwd (absolute path)' },
    strict: { type: 'boolean', help: 'turn on the strict invariants (turn/step/tool pairing)' },
    'no-pairing-guard': { type: 'boolean', help: 'turn off the tool-pairing guard (on by default: a replace may not split a tool call from its result)' },
  },
  examples: ['palimpsest create --id demo --label team=search', 'palimpsest create --id raw --no-pairing-guard'],
  async run(ctx) {
    const { args, rpc } = ctx;
    const res = await rpc.unary(rpc.client.createSession, {
      sessionId: args.str('id') ?? '', labels: args.labels(), cwd: args.str('cwd'), strict: args.flag('strict'),
      pairingGuard: args.flag('no-pairing-guard') ? false : undefined,
      origin: undefined, delegationDepth: undefined, agentPreset: undefined,
    });
    await printId(ctx, res.session);
  },
};

const get: Command = {
  name: 'get',
  summary: "Shows a session's header, labels and counts.",
  positionals: [{ name: 'SESSION' }],
  options: {},
  examples: ['palimpsest get demo --json'],
  async run({ args, rpc, out }) {
    const { session } = await rpc.unary(rpc.client.getSession, { sessionId: args.pos(0) });
    if (!session) return;
    if (out.json) await out.printJson(sessionObject(session));
    else await out.write(sessionDetails(session, out.style));
  },
};

const sessions: Command = {
  name: 'sessions',
  summary: 'Lists sessions, newest first (a JSON array with --json).',
  positionals: [],
  options: {
    label: { ...label, help: 'only sessions carrying this label (repeatable; all must match)' },
    limit: { type: 'string', value: 'N', help: 'list at most N sessions (default all)' },
    sort: { type: 'string', value: 'created|activity', help: 'newest created first (default), or most recent event first' },
    'older-than': { type: 'string', value: 'AGE', help: 'only sessions untouched for longer than AGE (30d, 12h, 90m, 45s): last event time, or creation (read-only)' },
    watch: { type: 'boolean', help: 'follow the session feed instead: one line per change of any session (SubscribeSessions) until Ctrl-C' },
    selector: { type: 'string', multiple: true, value: 'KEY=VALUE', help: 'with --watch: only sessions carrying this label (repeatable; all must match)' },
    after: { type: 'string', value: 'POS', help: 'with --watch: resume after this feed position (default from the beginning)' },
    'from-now': { type: 'boolean', help: 'with --watch: only changes from now on' },
    heartbeat: { type: 'string', value: 'MS', help: "with --watch: heartbeat interval (default the server's; minimum 100)" },
    'no-reconnect': { type: 'boolean', help: 'with --watch: exit (status 3) when the connection drops instead of resuming' },
  },
  examples: [
    'palimpsest sessions --label team=search --limit 20', 'palimpsest sessions --sort activity --limit 5', 'palimpsest sessions --older-than 30d --json',
    'palimpsest sessions --watch --json --selector team=search',
  ],
  async run(ctx) {
    if (ctx.args.flag('watch')) return watchSessions(ctx);
    const { args, rpc, out } = ctx;
    let all: Session[] = [];
    const labelSelector = args.labels();
    const sort = args.str('sort') ?? 'created';
    if (sort !== 'created' && sort !== 'activity') throw new UsageError(`--sort must be created or activity, got ${JSON.stringify(sort)}`);
    const limit = args.int('limit', 1);
    const age = args.str('older-than');
    const cutoff = age === undefined ? undefined : Date.now() - parseAge('--older-than', age);
    await paginate(
      // By activity or age, every session is read first: the most active may be the oldest.
      sort === 'activity' || cutoff !== undefined ? undefined : limit,
      async (pageSize, pageToken) => {
        const r = await rpc.unary(rpc.client.listSessions, { pageSize, pageToken, labelSelector });
        return { items: r.sessions, nextPageToken: r.nextPageToken };
      },
      async (items) => { all.push(...items); },
    );
    if (sort === 'activity') all = await byActivity(rpc, all);
    if (cutoff !== undefined) {
      const aged = (await olderThan(rpc, all, cutoff)).slice(0, limit);
      all = aged.map((a) => a.session);
      if (out.json) {
        await out.printJson(aged.map((a) => ({ ...sessionObject(a.session), lastActivity: a.lastActivity })));
        return;
      }
    } else if (sort === 'activity') all = all.slice(0, limit ?? all.length);
    if (out.json) await out.printJson(all.map(sessionObject));
    else if (all.length === 0) await out.write(out.style.dim('no sessions\n'));
    else await out.write(formatTable(SESSION_COLUMNS, all.map((s) => sessionRow(s, out.style)), out.style));
  },
};

/** Sessions by the time of their last event, most recent first (then newest created). */
async function byActivity(rpc: Rpc, sessions: readonly Session[]): Promise<Session[]> {
  const last = new Map<string, number>();
  const queue = [...sessions];
  // A few reads in flight: one backward page of one event per session.
  await Promise.all(Array.from({ length: Math.min(8, queue.length) }, async () => {
    for (let s = queue.shift(); s !== undefined; s = queue.shift()) {
      if (s.headSeq === undefined) { last.set(s.id, s.createdAt); continue; }
      const r = await rpc.unary(rpc.client.listEvents, {
        sessionId: s.id, fromSeq: undefined, direction: Direction.DIRECTION_BACKWARD, pageSize: 1, pageToken: '', types: [], dataFormat: DataFormat.DATA_FORMAT_JSON, blobRefs: false,
      });
      last.set(s.id, Math.max(s.createdAt, r.events[0]?.time ?? s.createdAt));
    }
  }));
  return [...sessions].sort((a, b) => (last.get(b.id)! - last.get(a.id)!) || (b.createdAt - a.createdAt));
}

const del: Command = {
  name: 'delete',
  summary: 'Deletes a session and its events.',
  positionals: [{ name: 'SESSION' }],
  options: {},
  examples: ['palimpsest delete demo'],
  async run({ args, rpc, out }) {
    const id = args.pos(0);
    await rpc.unary(rpc.client.deleteSession, { sessionId: id });
    if (out.json) await out.printJson({ id, deleted: true });
    else await out.write(`deleted ${id}\n`);
  },
};

const fork: Command = {
  name: 'fork',
  summary: "Forks a session up to a seq (default its last event) and prints the child's id.",
  details: 'The child starts with the parent\'s events up to --at, then a session/end-seed marker. A boundary inside a turn is OPEN_TURN.',
  positionals: [{ name: 'SESSION' }],
  options: {
    at: { type: 'string', value: 'SEQ', help: 'last seq to copy (inclusive)' },
    id: { type: 'string', value: 'CHILD', help: 'child session id (default a generated UUID)' },
    label,
  },
  examples: ['palimpsest fork demo --at 41 --id demo-retry'],
  async run(ctx) {
    const { args, rpc } = ctx;
    const res = await rpc.unary(rpc.client.forkSession, {
      sessionId: args.pos(0), atSeq: args.int('at'), childSessionId: args.str('id') ?? '', labels: args.labels(),
    });
    await printId(ctx, res.session);
  },
};

/** The session commands, in help order. */
export const SESSION_COMMANDS: readonly Command[] = [create, get, sessions, del, fork];
