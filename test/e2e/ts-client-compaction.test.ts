/**
 * @palimpsest/client's compaction, pruning, time travel and tool-pairing wrappers (issues #14/#18)
 * against a real server: planCompaction + compact showing the summary in messages(), a stale plan
 * refused with HEAD_MISMATCH, pruneToolResults by seq (and PRUNE_TARGET_INVALID), `asOfSeq`, and a
 * TOOL_PAIRING_BROKEN refusal decoded with its metadata; each refusal leaves the log untouched.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PalimpsestClient, PalimpsestError, events as ev } from '../../clients/typescript/src/index.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

async function rejection(p: Promise<unknown>): Promise<PalimpsestError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(PalimpsestError);
    return e as PalimpsestError;
  }
  throw new Error('expected the call to fail');
}

interface Turn { user: number; assistant: number; call: number; result: number; head: number }
type Message = { id: string; source: Record<string, unknown>; content: { type: string; text?: string; content?: { text: string }[] }[] };

/** Appends turn n (user message, assistant message calling a tool, the call, its result). */
async function toolTurn(c: PalimpsestClient, id: string, n: number, output: string): Promise<Turn> {
  const head = await c.head(id);
  const base = head + 1;
  const call = base + 4;
  const seqs = await c.append(id, [
    ev.turnStart(n), ev.stepStart(n, 1), ev.userMessage('What is here?', { id: `u${n}` }),
    ev.assistantMessage('', { turn: n, step: 1, provider: 'p', model: 'm', id: `a${n}`, toolCalls: [{ id: `c${n}`, name: 'ls', arguments: '{}' }], cites: [] }),
    ev.toolCall(`c${n}`, 'ls', '{}', { turn: n, step: 1 }), ev.toolResult(`c${n}`, output, { turn: n, step: 1, id: `r${n}`, callSeq: call }),
    ev.stepEnd(n, 1), ev.turnEnd(n),
  ], { expectedLastSeq: head });
  return { user: base + 2, assistant: base + 3, call, result: call + 1, head: seqs.at(-1)! };
}

const textOf = (m: Message): string => m.content.map((b) => b.text ?? '').join('');

describe('@palimpsest/client compaction and pruning (TypeScript)', () => {
  let ts: TestServer;
  let c: PalimpsestClient;
  let n = 0;
  const sid = (): string => `tsc-${++n}`;
  beforeAll(async () => {
    ts = await startTestServer();
    c = new PalimpsestClient(ts.server.address);
  });
  afterAll(async () => {
    c?.close();
    await ts?.stop();
  });

  it('planCompaction + compact puts the summary first in messages(); asOfSeq shows the history before', async () => {
    const id = sid();
    await c.createSession(id);
    // A range larger than the framed summary: the reference refuses a summary that is not smaller.
    const t1 = await toolTurn(c, id, 1, 'README.md\n'.repeat(100));
    const t2 = await toolTurn(c, id, 2, 'src/\n'.repeat(200));
    const surfaceBefore = await c.getSurface(id);
    const before = await c.messages(id);
    const plan = await c.planCompaction(id, { upToSeq: t1.result });
    expect(plan).toMatchObject({ start: t1.user, end: t1.result, shadowedSeqs: [t1.user, t1.assistant, t1.result], expectedLastSeq: t2.head, blockers: [] });
    let seen: unknown[] = [];
    const res = await c.compact(id, {
      plan, provider: 'p', model: 'summariser',
      summary: (msgs) => { seen = msgs; return `ls showed README.md (${msgs.length} messages)`; },
    });
    expect(res!.seqs).toHaveLength(4);
    expect((seen as Message[]).map((m) => m.id)).toEqual(['u1', 'a1', 'r1']);
    const after = await c.messages(id) as Message[];
    expect(after[0]!.source).toEqual({ kind: 'plugin', plugin: 'compact', compactionId: res!.compactionId });
    expect(textOf(after[0]!)).toContain('ls showed README.md (3 messages)');
    expect(after.slice(1)).toEqual(before.slice(3));
    expect(await c.getSurface(id, { asOfSeq: t2.head })).toEqual(surfaceBefore);
    expect(await c.messages(id, { asOfSeq: t2.head })).toEqual(before);
    const e = await rejection(c.getSurface(id, { asOfSeq: res!.seqs[3]! + 1 }));
    expect(e).toMatchObject({ code: 'OUT_OF_RANGE', reason: 'AS_OF_SEQ_AFTER_HEAD' });

    // The stale plan: HEAD_MISMATCH, nothing written; a budget plans again.
    const head = await c.head(id);
    expect((await rejection(c.compact(id, { plan, summary: 'again', provider: 'p', model: 'm' }))).reason).toBe('HEAD_MISMATCH');
    expect(await c.head(id)).toBe(head);
    const res2 = await c.compact(id, { keepTokens: 1, summary: [{ type: 'text', text: 'both turns' }], provider: 'p', model: 'm' });
    expect(res2!.seqs[0]).toBe(head + 1);
    expect(textOf((await c.messages(id) as Message[])[0]!)).toContain('both turns');
    expect(await c.compact(id, { keepTokens: 2 ** 40, summary: 'x', provider: 'p', model: 'm' })).toBeUndefined();
    expect(await c.head(id)).toBe(res2!.seqs[3]);
  });

  it('retainTokens keeps the shortest tail of at least N tokens; a summary not smaller than the range is refused as the reference does', async () => {
    const id = sid();
    await c.createSession(id);
    const t1 = await toolTurn(c, id, 1, 'a');
    const t2 = await toolTurn(c, id, 2, 'b');
    // Retaining 1 token keeps the last node (t2's result); its call stays with it, so the cut moves
    // to the balanced boundary before t2's assistant message.
    const plan = await c.planCompaction(id, { retainTokens: 1 });
    expect(plan.shadowedSeqs).toEqual([t1.user, t1.assistant, t1.result, t2.user]);
    // keepTokens 1 keeps at most 1 token: the same cut here (one node is always kept).
    expect((await c.planCompaction(id, { keepTokens: 1 })).shadowedSeqs).toEqual(plan.shadowedSeqs);
    const res = await c.compact(id, { plan, summary: 'x'.repeat(4000), provider: 'p', model: 'm', sourceCommandId: 'cmd-1' });
    expect(res!.error).toMatch(/^summary is not smaller than the shadowed content \(\d+ estimated framed tokens >= \d+\)$/);
    expect(res!.seqs).toHaveLength(2);
    const written: { type: string; data: unknown }[] = [];
    for await (const e of c.events(id, { after: res!.seqs[0]! - 1 })) written.push({ type: e.type, data: JSON.parse(e.data?.kind?.$case === 'json' ? e.data.kind.value : 'null') });
    expect(written.map((e) => e.type)).toEqual(['compaction/start', 'compaction/end']);
    expect(written[1]!.data).toMatchObject({ sourceCommandId: 'cmd-1', error: res!.error });
    expect(await c.getSurface(id)).toEqual([t1.user, t1.assistant, t1.result, t2.user, t2.assistant, t2.result]);
  });

  it('pruneToolResults shortens a result in place; a seq that is no tool result is refused', async () => {
    const id = sid();
    await c.createSession(id);
    const long = 'line of build output\n'.repeat(400);
    const t1 = await toolTurn(c, id, 1, long);
    const e = await rejection(c.pruneToolResults(id, { seqs: [t1.user] }));
    expect(e).toMatchObject({ code: 'FAILED_PRECONDITION', reason: 'PRUNE_TARGET_INVALID', metadata: { seq: String(t1.user) } });
    expect(await c.head(id)).toBe(t1.head);
    const res = await c.pruneToolResults(id, { seqs: [t1.result], headChars: 20, tailChars: 20, expectedLastSeq: t1.head });
    expect(res.pruned).toEqual([expect.objectContaining({ originalSeq: t1.result, callId: 'c1', bytesBefore: long.length })]);
    const inner = ((await c.messages(id)) as Message[])[2]!.content[0]!.content![0]!.text;
    expect(inner.startsWith(long.slice(0, 20)) && inner.endsWith(long.slice(-20)) && inner.includes('pruned')).toBe(true);
  });

  it('TOOL_PAIRING_BROKEN is decoded with callId/callSeq/resultSeq and leaves the log untouched; pairingGuard: false accepts it', async () => {
    const id = sid();
    expect((await c.createSession(id)).pairingGuard).toBe(true);
    const t1 = await toolTurn(c, id, 1, 'README.md');
    const bad = [ev.userMessage('the result is gone', { id: 'x1', replace: [t1.result, t1.result], cites: [t1.result] })];
    const e = await rejection(c.append(id, bad));
    expect(e).toMatchObject({
      code: 'FAILED_PRECONDITION', reason: 'TOOL_PAIRING_BROKEN', metadata: { callId: 'c1', callSeq: String(t1.assistant), resultSeq: String(t1.result) },
    });
    expect(await c.head(id)).toBe(t1.head);
    const other = sid();
    expect((await c.createSession(other, { pairingGuard: false })).pairingGuard).toBe(false);
    const o1 = await toolTurn(c, other, 1, 'README.md');
    expect(await c.append(other, bad)).toEqual([o1.head + 1]);
  });

  it('messages({format}) renders the model history for a provider; importMessages writes a conversation that renders back to itself', async () => {
    const id = sid();
    await c.createSession(id);
    await toolTurn(c, id, 1, 'README.md');
    const msgs = await c.messages(id, { format: 'gemini' }) as { role: string; parts: Record<string, { id?: string }>[] }[];
    expect(msgs.map((m) => m.role)).toEqual(['user', 'model', 'user']);
    expect(msgs[1]!.parts[0]!['functionCall']?.id).toBe('c1');
    expect(msgs[2]!.parts[0]!['functionResponse']?.id).toBe('c1');
    const rendered = await c.renderedMessages(id, 'openai-responses');
    expect(rendered.map((r) => (r.message as { type: string }).type)).toEqual(['message', 'function_call', 'function_call_output']);
    // Each with its tokens; one Responses item per DSH message here, so they add up to
    // surface_tokens less the assistant's empty text block (4), which is not sent.
    expect(rendered.every((r) => r.tokens > 4)).toBe(true);
    expect(rendered.reduce((sum, r) => sum + r.tokens, 0)).toBe((await c.getSession(id)).surfaceTokens - 4);
    const other = sid();
    await c.createSession(other);
    const x = [
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] },
      { type: 'function_call', call_id: 'k', name: 'read', arguments: '{}' },
      { type: 'function_call_output', call_id: 'k', output: 'out' },
      { type: 'message', role: 'assistant', content: 'done' },
    ];
    expect(await c.importMessages(other, 'openai-responses', x)).toEqual([0, 1, 2, 3, 4]);
    expect(await c.messages(other, { format: 'openai-responses' })).toEqual(x);
    const bad = await rejection(c.importMessages(other, 'openai-responses', [{ type: 'function_call_output', call_id: 'ghost', output: 'x' }]));
    expect([bad.code, bad.reason, bad.metadata['index']]).toEqual(['INVALID_ARGUMENT', 'IMPORT_MESSAGES_INVALID', '0']);
  });
});
