/**
 * App-layer conformance cases of issue #16 over the memory store: what the service derives, forks
 * and imports where the reference's own code was run side by side.
 */
import { describe, expect, it } from 'vitest';
import { ANONYMOUS, SessionService } from '../../src/app/session-service.js';
import type { CandidateEvent } from '../../src/domain/event.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';

const ctx = ANONYMOUS;

function service(): SessionService {
  return new SessionService(new MemorySessionStore());
}

const wrappedResult = (id: string, callId: string, text: string): CandidateEvent => ({
  type: 'tool/result',
  data: { turn: 1, step: 1, message: { id, role: 'user', source: { kind: 'tool', callId }, content: [{ type: 'tool-result', toolCallId: callId, content: [{ type: 'text', text }], isError: false }] } },
  surfaceOp: 'append',
});
const legacyResult = (callId: string, text: string, op: unknown, sources?: number[]): CandidateEvent => ({
  type: 'tool/result',
  data: { turn: 1, step: 1, callId, content: [{ type: 'text', text }], isError: false },
  surfaceOp: op,
  ...(sources === undefined ? {} : { sourceEventSeqs: sources }),
});
const rep = (seq: number): unknown => ({ op: 'replace', start: seq, end: seq });

describe('item 5: an upgraded legacy prune keeps the id of the message it replaces, through nested prunes', () => {
  it.each<[string, CandidateEvent, string]>([
    ['a wrapped original', wrappedResult('orig', 'c1', 'full output'), 'orig'],
    ['a legacy original', legacyResult('c1', 'full output', 'append'), 'legacy-message:s:0'],
  ])('given %s pruned twice by legacy tool/results, when the model history is read (cold), then the pruned message has the original id', async (_name, original, id) => {
    const app = service();
    // A bare tool result without its call (the reference's shape of this case): the tool-pairing
    // guard (on by default, issue #14) would refuse it, and this item is about ids, not pairing.
    await app.createSession(ctx, { id: 's', pairingGuard: false });
    await app.append(ctx, 's', [original, legacyResult('c1', 'pruned once', rep(0), [0]), legacyResult('c1', 'pruned twice', rep(1), [1])]);
    const { messages } = await app.getMessages(ctx, 's', 'model');
    expect(messages.map((m) => [m.seq, (m.message as { id: string }).id])).toEqual([[2, id]]);
    // A fresh service over the same store (a cold read) agrees.
    const cold = new SessionService(app.store);
    const again = await cold.getMessages(ctx, 's', 'model');
    expect(again.messages.map((m) => (m.message as { id: string }).id)).toEqual([id]);
  });
});

describe('item 11: forking an empty session', () => {
  it('given an empty source, when forked, then the child holds a session/end-seed marker at seq 0 with seedLength 0', async () => {
    const app = service();
    await app.createSession(ctx, { id: 'empty' });
    const child = await app.fork(ctx, 'empty', { childId: 'child' });
    expect([child.record.header.seedLength, child.record.header.parentSession, child.eventCount, child.headSeq]).toEqual([0, 'empty', 1, 0]);
    const events = await app.listEvents(ctx, 'child', { direction: 'forward' });
    expect(events.events.map((e) => [e.seq, e.type, e.dataText])).toEqual([[0, 'session/end-seed', '{}']]);
  });
});

function chunks(text: string): AsyncIterable<Uint8Array> {
  return (async function* () {
    yield new TextEncoder().encode(text);
  })();
}

describe('item 10: import refuses seq gaps unless allow_seq_gaps', () => {
  const header = '{"type":"session","version":0,"id":"g","createdAt":1}';
  const file = [header, '{"type":"note","seq":0,"time":1,"data":{}}', '{"type":"note","seq":2,"time":1,"data":{}}', ''].join('\n');

  it('given a file whose line 3 skips seq 1, then SEQ_NOT_CONTIGUOUS naming the missing seq and the line; no session is left', async () => {
    const app = service();
    await expect(app.importJsonl(ctx, chunks(file), {})).rejects.toMatchObject({ reason: 'SEQ_NOT_CONTIGUOUS', metadata: { line: '3', missingSeq: '1' } });
    await expect(app.getSession(ctx, 'g')).rejects.toMatchObject({ reason: 'SESSION_NOT_FOUND' });
  });

  it('given allowSeqGaps, then imported with the gap; forks of it work and live appends continue at last seq + 1', async () => {
    const app = service();
    const view = await app.importJsonl(ctx, chunks(file), { allowSeqGaps: true });
    expect([view.eventCount, view.headSeq]).toEqual([2, 2]);
    const child = await app.fork(ctx, 'g', { childId: 'g2' });
    expect(child.headSeq).toBe(3);
    expect((await app.append(ctx, 'g', [{ type: 'note', data: {} }])).seqs).toEqual([3]);
  });
});

describe('item 12: torn tails import as the reference loads them', () => {
  const header = '{"type":"session","version":0,"id":"t","createdAt":1}';
  const records = [
    '{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}',
    '{"type":"user/message","seq":1,"time":2,"data":{"id":"u1","role":"user","content":[{"type":"text","text":"héllo ✓"}],"source":{"kind":"user"}},"surfaceOp":"append"}',
  ];
  const committed = [header, records[0], ''].join('\n');
  const last = `${records[1]}\n`;

  it('given a crashed file cut at every byte of its last record, then the committed prefix is imported and the response counts the left-out tail', async () => {
    const bytes = new TextEncoder().encode(committed + last);
    const prefix = new TextEncoder().encode(committed).length;
    for (let cut = prefix; cut < bytes.length; cut++) {
      const app = service();
      // Chunked unevenly, so a cut can fall inside a multi-byte character and between chunks.
      const data = bytes.subarray(0, cut);
      const parts = (async function* () {
        for (let i = 0; i < data.length; i += 7) yield data.subarray(i, i + 7);
      })();
      const view = await app.importJsonl(ctx, parts, {});
      expect([cut, view.eventCount, view.headSeq, view.uncommittedTailBytes]).toEqual([cut, 1, 0, cut - prefix]);
    }
    const whole = await service().importJsonl(ctx, chunks(committed + last), {});
    expect([whole.eventCount, whole.uncommittedTailBytes]).toEqual([2, 0]);
  });

  it('given a complete last record without its newline, then it is an uncommitted tail and is not imported (the reference drops it too)', async () => {
    const view = await service().importJsonl(ctx, chunks(committed + records[1]), {});
    expect([view.eventCount, view.uncommittedTailBytes]).toEqual([1, new TextEncoder().encode(records[1]).length]);
  });

  it('given a file whose only line (the header) has no newline, then JSONL_INVALID saying nothing was committed; no session is left', async () => {
    const app = service();
    await expect(app.importJsonl(ctx, chunks(header), {})).rejects.toMatchObject({ reason: 'JSONL_INVALID', message: expect.stringContaining('newline') });
    await expect(app.getSession(ctx, 't')).rejects.toMatchObject({ reason: 'SESSION_NOT_FOUND' });
  });

  it('given a bad record before the last line, then still refused (only the unterminated tail is forgiven)', async () => {
    const app = service();
    await expect(app.importJsonl(ctx, chunks([header, '{"type":', records[0], ''].join('\n')), {})).rejects.toMatchObject({ reason: 'JSONL_INVALID', metadata: { line: '2' } });
  });
});

describe('items 8 and 9 through import', () => {
  const header = '{"type":"session","version":0,"id":"st","createdAt":1}';
  const steer = '{"type":"steering/message","seq":1,"time":2,"data":{"turn":1,"content":[{"type":"text","text":"left"}],"source":{"kind":"user"}},"surfaceOp":"append"}';
  const file = (...lines: string[]) => [header, '{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}', ...lines, ''].join('\n');

  it('given a steering/message, then it imports, exports verbatim and is a user message in both views', async () => {
    const app = service();
    const text = file(steer, '{"type":"turn/end","seq":2,"time":3,"data":{"turn":1,"reason":{"kind":"completed"}}}');
    await app.importJsonl(ctx, chunks(text), {});
    const expected = { content: [{ type: 'text', text: 'left' }], source: { kind: 'user' }, id: 'legacy-message:st:1', role: 'user' };
    expect((await app.getMessages(ctx, 'st', 'model')).messages.map((m) => m.message)).toEqual([expected]);
    expect((await app.getMessages(ctx, 'st', 'transcript')).messages.map((m) => m.message)).toEqual([expected]);
    const out: string[] = [];
    for await (const lines of app.exportJsonl(ctx, 'st')) out.push(...lines);
    expect(out.slice(1).join('\n') + '\n').toBe(text.slice(header.length + 1));
    // A fork replays it (import mode) and the cold engine sees it on the surface.
    expect((await app.fork(ctx, 'st', { childId: 'st2' })).surfaceLength).toBe(1);
  });

  it('given a turn/end reason with extra keys, then TURN_SHAPE with its line and no session; the same event appends live', async () => {
    const app = service();
    const bad = '{"type":"turn/end","seq":1,"time":2,"data":{"turn":1,"reason":{"kind":"completed","note":"x"}}}';
    await expect(app.importJsonl(ctx, chunks(file(bad)), {})).rejects.toMatchObject({ reason: 'TURN_SHAPE', metadata: { line: '3' } });
    await expect(app.getSession(ctx, 'st')).rejects.toMatchObject({ reason: 'SESSION_NOT_FOUND' });
    await app.createSession(ctx, { id: 'live' });
    expect((await app.append(ctx, 'live', [{ type: 'turn/end', data: { turn: 1, reason: { kind: 'completed', note: 'x' } } }])).seqs).toEqual([0]);
  });
});
