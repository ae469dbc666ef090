/**
 * Reported bug (src/domain/json.ts, owner: domain): toFrozenJson recurses once per nesting level,
 * so a deeply nested value overflows the stack and throws RangeError instead of its documented
 * DomainError. The server and the importer now refuse data deeper than MAX_JSON_DEPTH (200)
 * before it reaches the domain (src/app/json-depth.ts), so this is not reachable over gRPC, but
 * the engine's plan() still turns such a candidate into an unexpected error for any other caller.
 */
import { describe, expect, it } from 'vitest';
import { toFrozenJson } from '../../src/domain/json.js';
import { DomainError } from '../../src/domain/errors.js';
import { SessionEngine } from '../../src/domain/session-engine.js';

function deep(n: number): unknown {
  let v: unknown = [];
  for (let i = 0; i < n; i++) v = [v];
  return v;
}

describe('deeply nested JSON in the domain', () => {
  it('toFrozenJson of a 100000-deep array throws a DomainError, not RangeError', () => {
    let thrown: unknown;
    try {
      toFrozenJson(deep(100_000), 'data');
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(DomainError);
  });

  it('plan() rejects a 100000-deep candidate with a DomainError and leaves the engine untouched', () => {
    const engine = SessionEngine.create();
    let thrown: unknown;
    try {
      engine.plan([{ type: 'x/y', data: deep(100_000) } as never], { mode: 'append', now: () => 0, sessionId: 's', lookup: () => undefined });
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(DomainError);
    expect(engine.nextSeq).toBe(0);
  });
});
