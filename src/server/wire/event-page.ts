/**
 * The encoded ListEvents page: the one owner of its wire format and of the size rule pages are cut
 * by. A page is the `events` field of `palimpsest.v1.ListEventsResponse` repeated: each event is
 * the field's tag, its length and a `palimpsest.v1.SessionEvent` with its data in the json form,
 * byte for byte what the generated encoder writes (proto/ is the published schema; event-encode.ts
 * writes the same bytes from JavaScript, listEventsResponseOf frames a page as a response).
 *
 * A store may write such pages itself, faster (the EncodedEventPages capability of
 * src/app/ports/capabilities.ts; the SQLite extension's palimpsest_event_page,
 * sqlite-ext/sqlite-checksums.c). It declares the version of the format it writes
 * (`eventPageFormat`, read from the extension when it loads), and its pages are used only when
 * that version is EVENT_PAGE_FORMAT: a store built for another format is read as rows instead.
 * test/integration/sqlite-event-page.test.ts pins the extension's bytes to this module's.
 */

/**
 * The version of the page format above and of pageEventBytes. Bump it (and EVENT_PAGE_FORMAT in
 * sqlite-ext/sqlite-checksums.c) for any change to what a page holds or to the size rule.
 */
export const EVENT_PAGE_FORMAT = 1;

/**
 * What one event adds to a ListEvents page's size estimate, by which pages are cut below the
 * max message size: its data and type bytes (UTF-8), 11 per cited seq, 64 for the rest of its
 * envelope. The server's rows path (handlers.ts) and a store's encoded pages cut at the same event
 * (always keeping at least one).
 */
export function pageEventBytes(dataBytes: number, typeBytes: number, citedSeqs: number): number {
  return dataBytes + typeBytes + 11 * citedSeqs + 64;
}
