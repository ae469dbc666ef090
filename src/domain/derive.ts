/**
 * The two projections of a session log (dsh-semantics 3):
 *
 * - **Model history** (`deriveMessages`, `MessageProjection`): walk the surface in order and project
 *   each node: user/message -> `data`, assistant/message -> `data.message` unless its content is
 *   empty (the node stays on the surface, it carries usage), tool/result -> `data.message`. Legacy
 *   shapes go through the upgrade view (message-view.ts). No merging, no reordering, no system
 *   message. Messages are the frozen objects of the log (shared, never copied) for canonical events.
 * - **Human transcript** (`deriveTranscript`): the *append-origin* surface events, i.e. every
 *   user/message, assistant/message and tool/result whose `surfaceOp` is `"append"`, in log (seq)
 *   order, **including those later shadowed** by a replace: a compaction summary or a pruned
 *   tool-result copy is model-only, and what the human said and saw stays in the transcript.
 *   Assistant messages with empty content are skipped there too (nothing to show).
 */
import type { Json, SessionEvent } from './event.js';
import type { BatchPlan } from './session-engine.js';
import { messageOf, type MessageJson, type TargetIdResolver } from './message-view.js';

/**
 * The model-history message of one surface event, or undefined when it contributes none (an
 * assistant message with empty content, a non-surface type, malformed data).
 */
export function projectMessage(event: SessionEvent, sessionId: string, resolveTargetId?: TargetIdResolver): MessageJson | undefined {
  const m = messageOf(event, sessionId, resolveTargetId);
  if (m === undefined) return undefined;
  if (event.type === 'assistant/message') {
    const content = m['content'];
    if (Array.isArray(content) && content.length === 0) return undefined;
  }
  return m;
}

function resolverFrom(sessionId: string, lookup: (seq: number) => SessionEvent | undefined): TargetIdResolver {
  const resolve: TargetIdResolver = (seq) => {
    const t = lookup(seq);
    if (t === undefined) return undefined;
    const id = messageOf(t, sessionId, resolve)?.['id'];
    return typeof id === 'string' ? id : undefined;
  };
  return resolve;
}

/**
 * Model history from scratch: projects `surface` (seqs in surface order) through `lookup`.
 *
 * @throws Error if `lookup` lacks a surface event
 */
export function deriveMessages(surface: readonly number[], lookup: (seq: number) => SessionEvent | undefined, sessionId: string): MessageJson[] {
  const resolve = resolverFrom(sessionId, lookup);
  const out: MessageJson[] = [];
  for (const seq of surface) {
    const e = lookup(seq);
    if (e === undefined) throw new Error(`deriveMessages: surface event ${seq} is missing`);
    const m = projectMessage(e, sessionId, resolve);
    if (m !== undefined) out.push(m);
  }
  return out;
}

/** One entry of the human transcript. */
export interface TranscriptEntry {
  readonly seq: number;
  readonly time: number;
  readonly type: string;
  readonly message: MessageJson;
}

/** The human transcript of `events` (any log-ordered slice of the log); see the module comment. */
export function deriveTranscript(events: Iterable<SessionEvent>, sessionId: string): TranscriptEntry[] {
  const out: TranscriptEntry[] = [];
  for (const e of events) {
    if (e.surfaceOp !== 'append') continue;
    const m = projectMessage(e, sessionId);
    if (m !== undefined) out.push({ seq: e.seq, time: e.time, type: e.type, message: m });
  }
  return out;
}

/** JSON text of projected messages, computed once per message object (see messageJsonText). */
const messageTexts = new WeakMap<object, string>();

/**
 * `JSON.stringify(message)`, cached per message object. The projection keeps the same message
 * objects across reads (the frozen log objects, or objects it built and never changes), so a
 * model-history read serializes only the messages that are new since the last read. Only for
 * messages nobody mutates (the projection's).
 */
export function messageJsonText(message: Json): string {
  if (typeof message !== 'object' || message === null) return JSON.stringify(message);
  let text = messageTexts.get(message);
  if (text === undefined) {
    text = JSON.stringify(message);
    messageTexts.set(message, text);
  }
  return text;
}

/**
 * Incrementally maintained model history of one session. Hydrate it once from the surface events
 * (the app reads them from the store), then feed it every committed plan: an append costs O(1), a
 * replace O(range) plus an array splice; no event is re-projected. A plan that does not continue
 * the projection (it missed a commit) makes it un-hydrated, and the app hydrates it again.
 */
export class MessageProjection {
  private nodes: number[] = [];
  private msgs: (MessageJson | undefined)[] = [];
  private out: MessageJson[] | null = null;
  private syncedNextSeq = -1;

  constructor(readonly sessionId: string) {}

  /** True when the projection is in sync with a known nextSeq. */
  get isHydrated(): boolean {
    return this.syncedNextSeq >= 0;
  }

  /** The nextSeq the projection reflects (-1 when not hydrated). */
  get nextSeq(): number {
    return this.syncedNextSeq;
  }

  /**
   * Rebuilds from the surface events in surface order.
   *
   * @param nextSeq - the engine's nextSeq these events reflect
   * @param lookup - committed events by seq, only for ids of legacy tool/result replacements
   */
  hydrate(surfaceEvents: readonly SessionEvent[], nextSeq: number, lookup?: (seq: number) => SessionEvent | undefined): void {
    const resolve = lookup === undefined ? undefined : resolverFrom(this.sessionId, lookup);
    this.nodes = surfaceEvents.map((e) => e.seq);
    this.msgs = surfaceEvents.map((e) => projectMessage(e, this.sessionId, resolve));
    this.out = null;
    this.syncedNextSeq = nextSeq;
  }

  /** Forgets everything (the next read needs a hydrate). */
  invalidate(): void {
    this.nodes = [];
    this.msgs = [];
    this.out = null;
    this.syncedNextSeq = -1;
  }

  /**
   * Applies a committed plan. Returns false (and invalidates) if the plan does not continue this
   * projection.
   */
  apply(plan: BatchPlan): boolean {
    if (plan.baseNextSeq !== this.syncedNextSeq) {
      this.invalidate();
      return false;
    }
    const { events, deltas } = plan;
    for (let i = 0; i < deltas.length; i++) {
      const d = deltas[i];
      const e = events[i];
      if (d === undefined || e === undefined) break;
      if (d.kind === 'append') {
        const m = projectMessage(e, this.sessionId);
        this.nodes.push(d.seq);
        this.msgs.push(m);
        if (this.out !== null && m !== undefined) this.out.push(m);
      } else if (d.kind === 'replace') {
        const n = d.shadowed.length;
        if (this.nodes[d.index] !== d.shadowed[0] || this.nodes[d.index + n - 1] !== d.shadowed[n - 1]) {
          this.invalidate();
          return false;
        }
        const targetMsg = this.msgs[d.index];
        const targetId = targetMsg?.['id'];
        const m = projectMessage(e, this.sessionId, (seq) => (seq === d.start && typeof targetId === 'string' ? targetId : undefined));
        if (n === 1) {
          this.nodes[d.index] = d.seq;
          this.msgs[d.index] = m;
        } else {
          this.nodes.splice(d.index, n, d.seq);
          this.msgs.splice(d.index, n, m);
        }
        this.out = null;
      }
    }
    this.syncedNextSeq = events.length === 0 ? this.syncedNextSeq : (events[events.length - 1] as SessionEvent).seq + 1;
    return true;
  }

  /** The model history as a fresh array. @throws Error when not hydrated */
  history(): MessageJson[] {
    if (!this.isHydrated) throw new Error('MessageProjection is not hydrated');
    if (this.out === null) {
      const out: MessageJson[] = [];
      for (const m of this.msgs) if (m !== undefined) out.push(m);
      this.out = out;
    }
    return this.out.slice();
  }

  /** The model history with the seq each message is projected from (fresh array). */
  entries(): { seq: number; message: MessageJson }[] {
    if (!this.isHydrated) throw new Error('MessageProjection is not hydrated');
    const out: { seq: number; message: MessageJson }[] = [];
    for (let i = 0; i < this.msgs.length; i++) {
      const m = this.msgs[i];
      if (m !== undefined) out.push({ seq: this.nodes[i] as number, message: m });
    }
    return out;
  }

  /** The message of each surface node (undefined where it contributes none), aligned with surface() (fresh array). */
  nodeMessages(): (MessageJson | undefined)[] {
    return this.msgs.slice();
  }

  /** Seqs of the surface as the projection knows it (fresh array). */
  surface(): number[] {
    return this.nodes.slice();
  }
}
