/**
 * The divergences found by running the reference's own session code side by side (issue #16),
 * one block per item: the reference's answer, the log left untouched on a rejection, and the
 * accepted twin next to it.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import type { CandidateEvent } from '../../src/domain/event.js';
import { Harness, logEvent } from '../support/engine-harness.js';

let h: Harness;
beforeEach(() => {
  h = new Harness();
});

describe('item 7: an empty type string is a string', () => {
  it('given type "" on live append and on import, then accepted (the reference requires only typeof type === "string")', () => {
    expect(h.add(logEvent('')).events[0]?.type).toBe('');
    const imp = new Harness();
    expect(imp.add([{ type: '', seq: 0, time: 1, data: {} }], 'import').events[0]?.type).toBe('');
  });

  it('given a non-string type, then still ENVELOPE_INVALID and nothing changes', () => {
    h.expectReject([logEvent('ok'), { type: 5, data: {} } as CandidateEvent], 'ENVELOPE_INVALID', 1);
    h.expectReject([{ data: {} } as unknown as CandidateEvent], 'ENVELOPE_INVALID', 0);
  });
});
