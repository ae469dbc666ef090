/**
 * Strings stored as text must have a UTF-8 form: a lone UTF-16 surrogate (possible from JSON
 * escapes, e.g. a JSONL import or a JSON client) would be stored altered and read back as
 * damage. Refused at the app layer with the field named; the log and the session list untouched;
 * the same strings with a proper surrogate pair are accepted.
 */
import { describe, expect, it } from 'vitest';
import { ANONYMOUS, SessionService } from '../../src/app/session-service.js';
import { DomainError } from '../../src/domain/errors.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';

async function refusal(p: Promise<unknown>): Promise<DomainError> {
  const e = await p.then(() => undefined, (err: unknown) => err);
  expect(e).toBeInstanceOf(DomainError);
  return e as DomainError;
}

describe('lone surrogates in stored strings', () => {
  it('CreateSession refuses them in the cwd and agent preset (ids have their own charset rule); a surrogate pair is fine', async () => {
    const app = new SessionService(new MemorySessionStore());
    expect((await refusal(app.createSession(ANONYMOUS, { id: 'a\ud800' }))).reason).toBe('INVALID_SESSION_ID');
    for (const [field, req] of [['cwd', { id: 's1', cwd: '/w/\udc00' }], ['agentPreset', { id: 's2', agentPreset: 'p\ud83d' }]] as const) {
      const e = await refusal(app.createSession(ANONYMOUS, req));
      expect(e.reason).toBe('HEADER_INVALID');
      expect(e.metadata['field']).toBe(field);
    }
    expect((await app.listSessions(ANONYMOUS, {})).sessions).toEqual([]);
    const ok = await app.createSession(ANONYMOUS, { id: 's3', cwd: '/w/\u{1f600}', agentPreset: 'p\u{1f600}' });
    expect(ok.record.header).toMatchObject({ id: 's3', cwd: '/w/\u{1f600}', agentPreset: 'p\u{1f600}' });
  });

  it('AppendEvents refuses an event type with one (ENVELOPE_INVALID, field type) and appends nothing', async () => {
    const app = new SessionService(new MemorySessionStore());
    await app.createSession(ANONYMOUS, { id: 's' });
    const e = await refusal(app.append(ANONYMOUS, 's', [{ type: 'plugin/x', data: {} }, { type: 'plugin/\ud800', data: {} }]));
    expect(e.reason).toBe('ENVELOPE_INVALID');
    expect(e.metadata['field']).toBe('type');
    expect((await app.listEvents(ANONYMOUS, 's', { direction: 'forward' })).events).toEqual([]);
    await app.append(ANONYMOUS, 's', [{ type: 'plugin/\u{1f600}', data: { s: 'lone \ud800 in data is escaped as JSON' } }]);
    expect((await app.listEvents(ANONYMOUS, 's', { direction: 'forward' })).events.map((x) => x.type)).toEqual(['plugin/\u{1f600}']);
  });
});
