/**
 * Issue #37: an event's stored token figure (domain/event-tokens.ts) is exactly what the surface
 * sum adds for it (the estimate of the message derive.ts projects from it, in its session, with
 * its legacy replacement target resolved), for every event of the 37 reference sessions (legacy
 * shapes, steering messages, prunes and compactions among them); its usage text sums to what
 * addAssistantUsage reads from the data.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Json, SessionEvent } from '../../src/domain/event.js';
import { addUsageText, encodeUsage, eventTokenFigures, storedTokenFigures, UNKNOWN_FIGURES } from '../../src/domain/event-tokens.js';
import { deriveMessages, projectMessage } from '../../src/domain/derive.js';
import { messageView } from '../../src/domain/message-view.js';
import { addAssistantUsage, estimateMessageTokens, NO_USAGE } from '../../src/domain/token-estimate.js';

const DIR = join(import.meta.dirname, '..', 'fixtures', 'reference-sessions');

function load(file: string): { id: string; events: SessionEvent[] } {
  const lines = readFileSync(join(DIR, file), 'utf8').split('\n').filter((l) => l.trim() !== '');
  const header = JSON.parse(lines[0]!) as { id: string };
  return { id: header.id, events: lines.slice(1).map((l) => JSON.parse(l) as SessionEvent).filter((e) => typeof e.seq === 'number') };
}

describe('eventTokenFigures', () => {
  const files = readdirSync(DIR).filter((f) => f.endsWith('.jsonl'));

  it('equals the estimate of the message each event projects in its session, for every event of the reference sessions', () => {
    expect(files.length).toBeGreaterThan(30);
    let messages = 0;
    let legacy = 0;
    for (const file of files) {
      const { id, events } = load(file);
      const bySeq = new Map(events.map((e) => [e.seq, e] as const));
      for (const e of events) {
        const m = projectMessage(e, id, (seq) => {
          const v = bySeq.get(seq);
          const mid = v === undefined ? undefined : messageView(v, id, (s) => bySeq.get(s))?.['id'];
          return typeof mid === 'string' ? mid : undefined;
        });
        const f = eventTokenFigures(e);
        expect(f.tokens, `${file} seq ${e.seq}`).toBe(estimateMessageTokens(m));
        expect(f.usage === undefined ? NO_USAGE : addUsageText(NO_USAGE, f.usage), `${file} seq ${e.seq}`).toEqual(
          e.type === 'assistant/message' ? addAssistantUsage(NO_USAGE, e.data) : NO_USAGE);
        if (m !== undefined) messages++;
        if (typeof m?.['id'] === 'string' && (m['id'] as string).startsWith('legacy-message:')) legacy++;
      }
    }
    expect(messages).toBeGreaterThan(100);
    expect(legacy).toBeGreaterThan(0);
  });

  it('sums over any surface to the estimate of the derived model history', () => {
    for (const file of files) {
      const { id, events } = load(file);
      const bySeq = new Map(events.map((e) => [e.seq, e] as const));
      const surface = events.filter((e) => e.surfaceOp === 'append').map((e) => e.seq);
      const history = deriveMessages(surface, (s) => bySeq.get(s), id);
      expect(surface.reduce((a, s) => a + eventTokenFigures(bySeq.get(s)!).tokens, 0), file).toBe(history.reduce((a, m) => a + estimateMessageTokens(m), 0));
    }
  });

  it('usage texts keep every count exactly (fractions too); non-numbers and negatives count 0, as addAssistantUsage reads them', () => {
    const data: Json = { usage: { inputTokens: 0.1, outputTokens: 1e21, cacheReadTokens: -3, cacheWriteTokens: 'x' } };
    expect(encodeUsage(data)).toBe('0.1,1e+21,0,0');
    expect(addUsageText(addUsageText(NO_USAGE, encodeUsage(data)!), '0.2,0,0,0')).toEqual(addAssistantUsage(addAssistantUsage(NO_USAGE, data), { usage: { inputTokens: 0.2 } }));
    expect(encodeUsage({ message: {} })).toBeUndefined();
    expect(eventTokenFigures({ type: 'x/note', seq: 0, data: { usage: { inputTokens: 5 } } })).toEqual({ tokens: 0 });
    expect(eventTokenFigures({ type: 'toString', seq: 0, data: {}, surfaceOp: 'append' })).toEqual({ tokens: 0 });
  });

  it('a stored text that may hold blob references gives the unknown figure (its reader estimates the inflated event)', () => {
    const e = { type: 'user/message', seq: 0, data: { id: 'u', role: 'user', content: [{ type: 'text', text: 'hi' }] } as Json, surfaceOp: 'append' as const };
    expect(storedTokenFigures(e, JSON.stringify(e.data))).toEqual(eventTokenFigures(e));
    expect(storedTokenFigures(e, '{"x":{"$blob":"sha256:00"}}')).toBe(UNKNOWN_FIGURES);
  });
});
