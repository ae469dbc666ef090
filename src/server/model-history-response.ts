/**
 * GetMessages' model-history response, pre-encoded (the pass-through serializer sends the Buffer
 * as it is). The projection keeps its message objects across reads and never changes them
 * (domain/derive.ts), so what a response holds is named by its entries' message objects and seqs,
 * the head and the page token:
 * - each entry (field 1: tag, length, DerivedMessage{seq, message_json, tokens}) is encoded once
 *   per message object, so a read after an append encodes only the new messages;
 * - the whole response of the last few reads is kept too (RECENT_RESPONSES, at most RECENT_BYTES
 *   in all), so a read of an unchanged history checks its entries by identity and sends the same
 *   bytes, with no per-message work and no copy.
 * Byte for byte what GetMessagesResponse.encode writes (test/unit/model-history-response.test.ts).
 */
import type { Json } from '../domain/event.js';
import { messageJsonText } from '../domain/derive.js';
import { estimateMessageTokens } from '../domain/token-estimate.js';
import { GetMessagesResponse } from '../../gen/palimpsest/v1/service.js';

/** A model-history entry: the message's seq and its (immutable) message object. */
export interface ModelHistoryEntry {
  readonly seq: number;
  readonly message: Json;
}

const encodedEntries = new WeakMap<object, { readonly seq: number; readonly bytes: Uint8Array }>();

/** Whole responses kept (most recent first) and the bytes they may hold in all. */
const RECENT_RESPONSES = 8;
const RECENT_BYTES = 32 * 1024 * 1024;

interface Whole {
  readonly entries: readonly ModelHistoryEntry[];
  readonly headSeq: number | undefined;
  readonly nextPageToken: string;
  readonly bytes: Buffer;
}
const recent: Whole[] = [];

/** True when `w` was encoded from these very entries (same seqs, same message objects), head and token. */
function sameResponse(w: Whole, messages: readonly ModelHistoryEntry[], headSeq: number | undefined, nextPageToken: string): boolean {
  if (w.entries.length !== messages.length || w.headSeq !== headSeq || w.nextPageToken !== nextPageToken) return false;
  for (let i = 0; i < messages.length; i++) {
    const a = w.entries[i]!;
    const b = messages[i]!;
    if (a.seq !== b.seq || a.message !== b.message) return false;
  }
  return true;
}

/** The encoded GetMessagesResponse{messages, head_seq, next_page_token} of model-history entries. */
export function modelHistoryResponse(messages: readonly ModelHistoryEntry[], headSeq: number | undefined, nextPageToken = '', keep = true): Buffer {
  // Only object messages are immutable by identity (a primitive is equal to any other like it,
  // and is encoded each time, as it is cheap). `keep` false (a read as of an earlier seq, whose
  // message objects are built for that call and never seen again) neither looks nor keeps, so it
  // does not push the current histories' responses out.
  const cacheable = keep && messages.length > 0 && messages.every((m) => typeof m.message === 'object' && m.message !== null);
  if (cacheable) {
    for (let i = 0; i < recent.length; i++) {
      const w = recent[i]!;
      if (!sameResponse(w, messages, headSeq, nextPageToken)) continue;
      if (i > 0) {
        recent.splice(i, 1);
        recent.unshift(w);
      }
      return w.bytes;
    }
  }
  const bytes = encode(messages, headSeq, nextPageToken);
  if (cacheable && bytes.length <= RECENT_BYTES) {
    // The entries are copied: the caller's array is its own to change.
    recent.unshift({ entries: messages.map((m) => ({ seq: m.seq, message: m.message })), headSeq, nextPageToken, bytes });
    let total = 0;
    for (let i = 0; i < recent.length; i++) {
      total += recent[i]!.bytes.length;
      if (i >= RECENT_RESPONSES || total > RECENT_BYTES) {
        recent.length = i;
        break;
      }
    }
  }
  return bytes;
}

function encode(messages: readonly ModelHistoryEntry[], headSeq: number | undefined, nextPageToken: string): Buffer {
  const parts: Uint8Array[] = new Array<Uint8Array>(messages.length + 1);
  let size = 0;
  for (let i = 0; i < messages.length; i++) {
    const { seq, message } = messages[i]!;
    let bytes: Uint8Array;
    const cached = typeof message === 'object' && message !== null ? encodedEntries.get(message) : undefined;
    if (cached !== undefined && cached.seq === seq) bytes = cached.bytes;
    else {
      bytes = GetMessagesResponse.encode({ messages: [{ seq, messageJson: messageJsonText(message), message: undefined, tokens: estimateMessageTokens(message) }], headSeq: undefined, nextPageToken: '', rendered: [] }).finish();
      if (typeof message === 'object' && message !== null) encodedEntries.set(message, { seq, bytes });
    }
    parts[i] = bytes;
    size += bytes.length;
  }
  const tail = GetMessagesResponse.encode({ messages: [], headSeq, nextPageToken, rendered: [] }).finish();
  parts[messages.length] = tail;
  return Buffer.concat(parts, size + tail.length);
}
