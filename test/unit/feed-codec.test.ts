/**
 * SubscribeSessions wire form (src/server/feed-codec.ts): the messages spliced from each change's
 * shared bytes decode as the ts-proto encoding of the same message would, for one change and for
 * a batch, with positions beyond 32 bits; a batch repeated for the next stream is the same Buffer.
 * `palimpsest sessions --watch` prints a batch one line per change, each at its own position.
 */
import { describe, expect, it } from 'vitest';
import type { SessionChange } from '../../src/app/feed-subscription.js';
import { encodeChange, encodeChanges, feedItemToProto } from '../../src/server/feed-codec.js';
import { SubscribeSessionsResponse } from '../../gen/palimpsest/v1/service.js';
import { feedLines } from '../../src/cli/commands/sessions-watch.js';
import { Output } from '../../src/cli/output.js';

function change(position: number, id: string): SessionChange {
  return {
    kind: 'change', position, change: 'appended', sessionId: id, createdAt: 1_700_000_000_000, headSeq: position % 7, eventCount: 3,
    surfaceLength: 2, eventTypes: ['user/message'], labels: { team: id }, previousLabels: undefined, time: 1_700_000_000_123,
  };
}

describe('feed codec', () => {
  it('a lone change decodes as the ts-proto message, with its position on the change too', () => {
    const c = change(5_000_000_000, 's1');
    const decoded = SubscribeSessionsResponse.decode(encodeChange(c));
    expect(decoded).toEqual(feedItemToProto(c));
    expect(decoded.position).toBe(5_000_000_000);
    expect(decoded.kind?.$case === 'change' && decoded.kind.value.position).toBe(5_000_000_000);
  });

  it('a batch decodes to its changes in order, each with its position, the message at the last one; the same batch is the same Buffer', () => {
    const items = [change(127, 'a'), change(128, 'b'), change(2 ** 40 + 3, 'c')];
    const bytes = encodeChanges(items);
    const decoded = SubscribeSessionsResponse.decode(bytes);
    expect(decoded.position).toBe(2 ** 40 + 3);
    expect(decoded.kind?.$case).toBe('changes');
    const got = decoded.kind?.$case === 'changes' ? decoded.kind.value.changes : [];
    expect(got).toEqual(items.map((c) => (feedItemToProto(c).kind as { value: unknown }).value));
    expect(encodeChanges([...items])).toBe(bytes);
    expect(encodeChanges(items.slice(0, 2))).not.toBe(bytes);
  });

  it('sessions --watch prints one line per change of a batch, each at its own position; a lone change at its own', () => {
    const out = new Output(true, process.stdout, process.stderr, {});
    const items = [change(7, 'a'), change(9, 'b')];
    const lines = feedLines(SubscribeSessionsResponse.decode(encodeChanges(items)), out);
    expect(lines.map((l) => [l.json.position, l.json.session, l.json.kind])).toEqual([[7, 'a', 'appended'], [9, 'b', 'appended']]);
    expect(feedLines(SubscribeSessionsResponse.decode(encodeChange(change(11, 'c'))), out).map((l) => l.json.position)).toEqual([11]);
  });
});
