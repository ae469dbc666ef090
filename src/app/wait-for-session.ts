/** A subscription's wait for its session to be created (wait_for_create, issue #35). */
import { DomainError } from '../domain/errors.js';
import type { CallContext, SessionService } from './session-service.js';

/** How often a wait for a session's creation checks that its caller still wants it, ms. */
const WAIT_CHECK_MS = 1000;

/**
 * Resolves once the session exists (wait_for_create, issue #35): at once when it does, else when
 * the session feed reports its creation. The feed subscription starts at the feed's end before
 * the session is looked up, so a creation between the two is on the feed. Rejects with
 * CANCELLED once `wanted()` turns false (checked every WAIT_CHECK_MS), SERVER_SHUTDOWN when the
 * feed closes.
 */
export async function waitForSession(app: SessionService, ctx: CallContext, sessionId: string, wanted: () => boolean): Promise<void> {
  const feed = await app.sessionFeed.subscribe(ctx, { fromNow: true });
  try {
    try {
      await app.getSession(ctx, sessionId);
      return;
    } catch (e) {
      if (!(e instanceof DomainError) || e.reason !== 'SESSION_NOT_FOUND') throw e;
    }
    let pending = feed.next();
    for (;;) {
      let timer: NodeJS.Timeout | undefined;
      const tick = new Promise<'tick'>((resolve) => {
        timer = setTimeout(() => resolve('tick'), WAIT_CHECK_MS);
      });
      const r = await Promise.race([pending, tick]);
      clearTimeout(timer);
      if (r === 'tick') {
        if (!wanted()) throw new DomainError('CANCELLED', 'the stream ended while waiting for the session to be created', { sessionId });
        continue;
      }
      if (r === undefined) throw new DomainError('SERVER_SHUTDOWN', 'the server is shutting down; resubscribe to another replica or later', {});
      if (r.kind === 'change' && r.change === 'created' && r.sessionId === sessionId) return;
      pending = feed.next();
    }
  } finally {
    feed.close();
  }
}
