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

const header = (config: Record<string, unknown>, adapterDefaults?: unknown): CandidateEvent =>
  logEvent('request/header', { header: { config, ...(adapterDefaults === undefined ? {} : { adapterDefaults }) }, reason: 'initial' });

describe('item 3: request/header adapterDefaults', () => {
  const config = { provider: 'p', model: 'm', reasoningEffort: 'high', maxTokens: 8192 };
  it.each<[string, CandidateEvent]>([
    ['null', header(config, null)],
    ['an array', header(config, [])],
    ['an unknown key', header(config, { unknown: true })],
    ['a marker that is false', header(config, { maxTokens: false })],
    ['a marker that is 1', header(config, { maxTokens: 1 })],
    ['a marker whose value is absent from config', header({ provider: 'p', model: 'm', maxTokens: 1 }, { reasoningEffort: true })],
  ])('given adapterDefaults %s, when appended or imported, then REQUEST_HEADER_SHAPE and nothing changes', (_name, bad) => {
    h.expectReject([logEvent('ok'), bad], 'REQUEST_HEADER_SHAPE', 1);
    h.expectReject([{ ...bad, seq: 0, time: 1 }], 'REQUEST_HEADER_SHAPE', 0, 'import');
  });

  it('given markers that are exactly true for values present in config (or none at all), then accepted', () => {
    expect(h.plan([header(config, { reasoningEffort: true, maxTokens: true }), header(config, {}), header(config), header({ provider: 'p', model: 'm', maxTokens: 2 }, { maxTokens: true })]).events).toHaveLength(4);
  });
});
