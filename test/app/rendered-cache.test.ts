/**
 * The kept rendering of GetMessages in a provider format (src/app/rendered-messages.ts): reused
 * while the session's record, replace generation and surface are unchanged, extended from the
 * last safe cut after appends, rendered afresh after a replace (a prune) or when the session was
 * deleted and created again. After every step, in every format, the answer equals a fresh
 * rendering of the DSH model history.
 */
import { describe, expect, it } from 'vitest';
import { CompactionService } from '../../src/app/compaction.js';
import { ANONYMOUS, SessionService } from '../../src/app/session-service.js';
import type { CandidateEvent } from '../../src/domain/event.js';
import type { MessageJson } from '../../src/domain/message-view.js';
import { PROVIDER_FORMATS, renderHistory } from '../../src/domain/render/index.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';

const ctx = ANONYMOUS;

function turn(n: number, output: string): CandidateEvent[] {
  const callId = `c${n}`;
  return [
    { type: 'user/message', data: { id: `u${n}`, role: 'user', content: [{ type: 'text', text: `question ${n}` }], source: { kind: 'user' } }, surfaceOp: 'append' },
    { type: 'assistant/message', data: { turn: n, step: 1, message: { id: `a${n}`, role: 'assistant', content: [{ type: 'text', text: 'look' }, { type: 'tool-call', id: callId, name: 'read', arguments: '{"p":1}' }], source: { kind: 'model', provider: 'p', model: 'm' } } }, surfaceOp: 'append', sourceEventSeqs: [] },
    { type: 'tool/result', data: { turn: n, step: 1, message: { id: `r${n}`, role: 'user', source: { kind: 'tool', callId }, content: [{ type: 'tool-result', toolCallId: callId, content: [{ type: 'text', text: output }] }] } }, surfaceOp: 'append' },
    { type: 'assistant/message', data: { turn: n, step: 2, message: { id: `b${n}`, role: 'assistant', content: [{ type: 'text', text: `done ${n}` }], source: { kind: 'model', provider: 'p', model: 'm' } } }, surfaceOp: 'append', sourceEventSeqs: [] },
  ];
}

async function fresh(app: SessionService, id: string, format: (typeof PROVIDER_FORMATS)[number]): Promise<unknown[]> {
  const h = (await app.getMessages(ctx, id, 'model')).messages.map((m) => ({ seq: m.seq, message: m.message as MessageJson }));
  return renderHistory(format, h).map((m) => ({ json: m.json, seqs: m.seqs, tokens: m.tokens }));
}

const read = async (app: SessionService, id: string, format: (typeof PROVIDER_FORMATS)[number]): Promise<{ json: unknown; seqs: number[]; tokens: number }[]> =>
  (await app.getRenderedMessagesPage(ctx, id, { format, pageSize: 0, pageToken: '' })).messages;

describe('the kept rendering', () => {
  it.each(PROVIDER_FORMATS)('%s: unchanged, appended to, pruned, recreated: always a fresh rendering\'s answer', async (format) => {
    const app = new SessionService(new MemorySessionStore(), undefined, () => 1);
    const svc = new CompactionService(app);
    await app.createSession(ctx, { id: 's' });
    await app.append(ctx, 's', turn(1, 'x'.repeat(400)));
    const first = await read(app, 's', format);
    expect(first).toEqual(await fresh(app, 's', format));
    // Unchanged: the very same array.
    expect(await read(app, 's', format)).toBe(first);
    // Appended to: the messages before the cut are the same objects.
    await app.append(ctx, 's', turn(2, 'y'.repeat(400)));
    const second = await read(app, 's', format);
    expect(second).toEqual(await fresh(app, 's', format));
    expect(second[0]).toBe(first[0]);
    await app.append(ctx, 's', turn(3, 'short'));
    const beforePrune = await read(app, 's', format);
    expect(beforePrune).toEqual(await fresh(app, 's', format));
    // A replace (pruning the first result): a new generation, rendered afresh.
    const pruned = await svc.prune(ctx, 's', { seqs: [2], headChars: 10, tailChars: 10 });
    expect(pruned.pruned.length).toBe(1);
    const third = await read(app, 's', format);
    expect(third).toEqual(await fresh(app, 's', format));
    expect(third).not.toEqual(beforePrune);
    await app.append(ctx, 's', turn(4, 'z'));
    expect(await read(app, 's', format)).toEqual(await fresh(app, 's', format));
    // Deleted and created again under the same id the same way (same seqs, surface and replace
    // generation, other texts): another session record.
    const before = await read(app, 's', format);
    const surfaceBefore = await app.getSurface(ctx, 's');
    await app.deleteSession(ctx, 's');
    await app.createSession(ctx, { id: 's' });
    for (let n = 1; n <= 3; n++) await app.append(ctx, 's', turn(n + 10, 'w'.repeat(400)));
    await svc.prune(ctx, 's', { seqs: [2], headChars: 10, tailChars: 10 });
    await app.append(ctx, 's', turn(14, 'w'));
    const surfaceAfter = await app.getSurface(ctx, 's');
    expect([surfaceAfter.seqs, surfaceAfter.replaceGeneration]).toEqual([surfaceBefore.seqs, surfaceBefore.replaceGeneration]);
    const recreated = await read(app, 's', format);
    expect(recreated).toEqual(await fresh(app, 's', format));
    expect(recreated).not.toEqual(before);
  });
});
