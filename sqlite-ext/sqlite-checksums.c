/*
 * Palimpsest's SQLite extension: the row checksums of src/store/sqlite/integrity.ts computed over
 * the bytes SQLite already holds, so verifying a returned row costs no JS string walk.
 * Linux and macOS (scripts/build-sqlite-ext.mjs builds it; src/store/sqlite/sqlite-ext.ts loads it).
 *
 * SQL functions (deterministic, innocuous):
 *   palimpsest_event_line(seq, type, time, data, source_event_seqs, surface_op, ignorable, scrc, dcrc)
 *     -> the row checked and written as one text value (see event_line below)
 *   palimpsest_event_page(limit, budget, forward, <the nine columns above>)   (aggregate)
 *     -> a page of checked rows in the wire form of ListEventsResponse's events (see page_step)
 *   palimpsest_structure(seq, type, source_event_seqs, surface_op, ignorable, scrc, dcrc)   (aggregate)
 *     -> a whole log's structure, every row's scrc checked and the digest chained, in columns
 *        (see structure_final)
 *   palimpsest_scrc(seq, surface_op, source_event_seqs, ignorable, type), palimpsest_dcrc(time, data)
 *     -> the checksums of a row being written (see scrc_fn)
 *   palimpsest_digest(start, seq, scrc, dcrc)   (aggregate, rows in seq order) -> the session
 *     digest chained over the rows (see digest_step)
 *   palimpsest_checksums_format() -> LINE_FORMAT, the version of the line format and of the page's
 *     framing (the loader refuses any other: a stale build never feeds a newer decoder)
 *   palimpsest_event_page_format() -> EVENT_PAGE_FORMAT, the version of the wire form the page's
 *     events are written in: the capability src/server/wire/event-page.ts declares (the server
 *     uses the pages only when its EVENT_PAGE_FORMAT is the same)
 *   palimpsest_checksums_hw() -> 1 when the CPU's CRC-32C instruction is in use
 *
 * The canonical inputs, exactly as integrity.ts defines them:
 *   scrc = CRC-32C of `<seq>:<surface_op or ''>\t<HEX(source_event_seqs) or '-'>\t<ignorable or ''>\t<type>`
 *   dcrc = CRC-32C of `<time>\t<data>`
 * CRC-32C is the Castagnoli polynomial, reflected (0x82F63B78), init and final xor 0xFFFFFFFF:
 * SSE4.2's crc32 instruction where the CPU has it (checked at load), a slicing-by-8 table otherwise.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sqlite3ext.h"
SQLITE_EXTENSION_INIT1

/*
 * The version of event_line's format and of event_page's framing (its head) and of what they
 * accept; row-codec.ts LINE_FORMAT must be the same. Bump it for any change to either (a build of
 * another version is not used). 3: palimpsest_event_page. 4: the page's head carries its first and
 * last seq. 5: palimpsest_structure. 6: palimpsest_scrc, palimpsest_dcrc and palimpsest_digest (the
 * writer's checksums).
 */
#define LINE_FORMAT 6

/*
 * The version of the wire form event_page writes its events in (palimpsest.v1.ListEventsResponse
 * `events` fields, data in the json form, and the page byte estimate it cuts by); owned by
 * src/server/wire/event-page.ts (EVENT_PAGE_FORMAT), which must say the same. Bump both for any
 * change to what page_encode writes or to the estimate.
 */
#define EVENT_PAGE_FORMAT 1

static uint32_t table[8][256];

static void init_table(void) {
  for (uint32_t n = 0; n < 256; n++) {
    uint32_t c = n;
    for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[0][n] = c;
  }
  for (uint32_t n = 0; n < 256; n++) {
    for (int t = 1; t < 8; t++) table[t][n] = (table[t - 1][n] >> 8) ^ table[0][table[t - 1][n] & 0xff];
  }
}

/* Feeds bytes into a pre-inverted running state (the JS crcString convention). */
static uint32_t crc_soft(uint32_t crc, const unsigned char *p, size_t n) {
  while (n >= 8) {
    uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
    uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
    crc = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^ table[5][(lo >> 16) & 0xff] ^ table[4][lo >> 24] ^
          table[3][hi & 0xff] ^ table[2][(hi >> 8) & 0xff] ^ table[1][(hi >> 16) & 0xff] ^ table[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_HW 1
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const unsigned char *p, size_t n) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    c = __builtin_ia32_crc32di(c, w);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = (uint32_t)c;
  while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
  return c32;
}
#endif

static uint32_t (*crc_feed)(uint32_t, const unsigned char *, size_t) = crc_soft;

/*
 * 1 and the value in *out for an INTEGER, or a REAL holding a safe integer (a JS number bound as
 * a parameter arrives as REAL; the STRICT table stores it as INTEGER).
 */
static int integer_of(sqlite3_value *v, sqlite3_int64 *out) {
  int t = sqlite3_value_type(v);
  if (t == SQLITE_INTEGER) {
    *out = sqlite3_value_int64(v);
    return 1;
  }
  if (t == SQLITE_FLOAT) {
    double d = sqlite3_value_double(v);
    if (d >= -9007199254740991.0 && d <= 9007199254740991.0 && d == (double)(sqlite3_int64)d) {
      *out = (sqlite3_int64)d;
      return 1;
    }
  }
  return 0;
}

/* Appends the decimal text of v at p; returns the new end. */
static char *put_int(char *p, sqlite3_int64 v) {
  char buf[24];
  int i = sizeof buf;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do {
    buf[--i] = (char)('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (v < 0) buf[--i] = '-';
  memcpy(p, buf + i, sizeof buf - i);
  return p + (sizeof buf - i);
}

/*
 * 1 when t[0..n) is well-formed UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF):
 * only then is utf16_length what V8 decodes, so the JS side cuts the type exactly where it ends.
 */
static int valid_utf8(const unsigned char *t, int n) {
  int i = 0;
  while (i < n) {
    unsigned char c = t[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    int len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else
      return 0;
    if (i + len > n || t[i + 1] < lo || t[i + 1] > hi) return 0;
    for (int k = 2; k < len; k++)
      if (t[i + k] < 0x80 || t[i + k] > 0xBF) return 0;
    i += len;
  }
  return 1;
}

/* UTF-16 code units of UTF-8 text (what JS String#length counts). */
static sqlite3_int64 utf16_length(const unsigned char *t, int n) {
  sqlite3_int64 units = 0;
  for (int i = 0; i < n; i++) {
    unsigned char c = t[i];
    if ((c & 0xC0) != 0x80) units += c >= 0xF0 ? 2 : 1;
  }
  return units;
}

/* Feeds one byte (the table gives what the instruction gives). */
static uint32_t crc_byte(uint32_t crc, unsigned char b) { return table[0][(crc ^ b) & 0xff] ^ (crc >> 8); }

static const char hex_digits[] = "0123456789ABCDEF";

/* scrc: CRC-32C of `<seq>:<surface_op or ''>\t<HEX or '-'>\t<ignorable or ''>\t<type>` (integrity.ts structuralCrc). */
static sqlite3_int64 structural_crc(sqlite3_int64 seq, const unsigned char *op, int opBytes, int hasSeqs, const unsigned char *seqs, int seqsBytes,
                                    int hasIgnorable, sqlite3_int64 ign, const unsigned char *type, int typeBytes) {
  char digits[24];
  uint32_t c = crc_feed(0xFFFFFFFFu, (const unsigned char *)digits, (size_t)(put_int(digits, seq) - digits));
  c = crc_byte(c, ':');
  if (op != NULL) c = crc_feed(c, op, (size_t)opBytes);
  c = crc_byte(c, '\t');
  if (!hasSeqs) c = crc_byte(c, '-');
  for (int i = 0; i < seqsBytes; i++) c = crc_byte(crc_byte(c, hex_digits[seqs[i] >> 4]), hex_digits[seqs[i] & 15]);
  c = crc_byte(c, '\t');
  if (hasIgnorable) c = crc_feed(c, (const unsigned char *)digits, (size_t)(put_int(digits, ign) - digits));
  c = crc_byte(c, '\t');
  c = crc_feed(c, type, (size_t)typeBytes);
  return (sqlite3_int64)(c ^ 0xFFFFFFFFu);
}

/* dcrc: CRC-32C of `<time>\t<data>` (integrity.ts dataCrc). */
static sqlite3_int64 data_crc(sqlite3_int64 time, const unsigned char *text, int textBytes) {
  char digits[24];
  uint32_t c = crc_feed(0xFFFFFFFFu, (const unsigned char *)digits, (size_t)(put_int(digits, time) - digits));
  c = crc_byte(c, '\t');
  c = crc_feed(c, text, (size_t)textBytes);
  return (sqlite3_int64)(c ^ 0xFFFFFFFFu);
}

/* One event row's values, checked (check_row). */
struct row {
  sqlite3_int64 seq, time;
  const unsigned char *type, *text, *seqs, *op;
  int typeBytes, textBytes, seqsBytes, opBytes;
  int hasSeqs, ignorable;
};

/*
 * Checks one row (seq, type, time, data, source_event_seqs, surface_op, ignorable, scrc, dcrc):
 * 0 when both checksums match, 1 for structural damage, 2 for data damage, -1 when SQLite is out
 * of memory. Fills *r when 0. A value of a storage class the schema forbids (a flipped
 * record-header bit can turn TEXT into BLOB) fails the check its column belongs to; an empty
 * surface_op (never written: NULL is "none") is structural damage even though its canonical text
 * equals NULL's; so is a type that is not well-formed UTF-8 (types are well-formed strings).
 */
static int check_row(sqlite3_value **a, struct row *r) {
  sqlite3_int64 ign = 0, scrc = 0, dcrc = 0;
  r->seq = -1;
  int typeType = sqlite3_value_type(a[1]), textType = sqlite3_value_type(a[3]);
  int seqsType = sqlite3_value_type(a[4]), opType = sqlite3_value_type(a[5]), ignNull = sqlite3_value_type(a[6]) == SQLITE_NULL;
  int structuralOk = integer_of(a[0], &r->seq) && integer_of(a[7], &scrc) && typeType == SQLITE_TEXT &&
                     (seqsType == SQLITE_NULL || seqsType == SQLITE_BLOB) && (opType == SQLITE_NULL || opType == SQLITE_TEXT) &&
                     (ignNull || integer_of(a[6], &ign)) && !(opType == SQLITE_TEXT && sqlite3_value_bytes(a[5]) == 0);
  if (!structuralOk) return 1;
  if (!(integer_of(a[2], &r->time) && integer_of(a[8], &dcrc) && textType == SQLITE_TEXT)) return 2;
  r->type = sqlite3_value_text(a[1]);
  r->typeBytes = sqlite3_value_bytes(a[1]);
  r->text = sqlite3_value_text(a[3]);
  r->textBytes = sqlite3_value_bytes(a[3]);
  r->hasSeqs = seqsType == SQLITE_BLOB;
  r->seqs = r->hasSeqs ? sqlite3_value_blob(a[4]) : NULL;
  r->seqsBytes = r->hasSeqs ? sqlite3_value_bytes(a[4]) : 0;
  r->op = opType == SQLITE_TEXT ? sqlite3_value_text(a[5]) : NULL;
  r->opBytes = r->op != NULL ? sqlite3_value_bytes(a[5]) : 0;
  r->ignorable = !ignNull;
  if (r->type == NULL || r->text == NULL || (r->seqsBytes > 0 && r->seqs == NULL) || (opType == SQLITE_TEXT && r->op == NULL)) return -1;
  if (structural_crc(r->seq, r->op, r->opBytes, r->hasSeqs, r->seqs, r->seqsBytes, r->ignorable, ign, r->type, r->typeBytes) != scrc ||
      !valid_utf8(r->type, r->typeBytes))
    return 1;
  if (data_crc(r->time, r->text, r->textBytes) != dcrc) return 2;
  return 0;
}

/* `!<1 structural | 2 data>,<seq>`: the result for a damaged row. */
static void damage_result(sqlite3_context *ctx, int bad, sqlite3_int64 seq) {
  char err[32];
  char *q = err;
  *q++ = '!';
  *q++ = (char)('0' + bad);
  *q++ = ',';
  q = put_int(q, seq);
  sqlite3_result_text(ctx, err, (int)(q - err), SQLITE_TRANSIENT);
}

/*
 * palimpsest_event_line(seq, type, time, data, source_event_seqs, surface_op, ignorable, scrc, dcrc):
 * the row checked and written as one text value, so a read materialises one JS string per row
 * instead of eight values and an array (src/store/sqlite/row-codec.ts decodeEventLine):
 *   <seq>,<time>,<'1' or ''>,<UTF-16 length of type>,<UTF-8 bytes of data>,<HEX(source_event_seqs) or '-'>,<surface_op or ''>\t<type><data>
 * or, for a row that fails a checksum, `!<1 structural | 2 data>,<seq>`.
 */
static void event_line(sqlite3_context *ctx, int argc, sqlite3_value **a) {
  (void)argc;
  struct row r;
  int bad = check_row(a, &r);
  if (bad < 0) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  if (bad) {
    damage_result(ctx, bad, r.seq);
    return;
  }
  sqlite3_uint64 size = 4 * 24 + 16 + (sqlite3_uint64)r.seqsBytes * 2 + (sqlite3_uint64)r.opBytes + (sqlite3_uint64)r.typeBytes + (sqlite3_uint64)r.textBytes;
  char *out = sqlite3_malloc64(size);
  if (out == NULL) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  char *p = put_int(out, r.seq);
  *p++ = ',';
  p = put_int(p, r.time);
  *p++ = ',';
  if (r.ignorable) *p++ = '1';
  *p++ = ',';
  p = put_int(p, utf16_length(r.type, r.typeBytes));
  *p++ = ',';
  p = put_int(p, r.textBytes);
  *p++ = ',';
  if (!r.hasSeqs) *p++ = '-';
  for (int i = 0; i < r.seqsBytes; i++) {
    *p++ = hex_digits[r.seqs[i] >> 4];
    *p++ = hex_digits[r.seqs[i] & 15];
  }
  *p++ = ',';
  if (r.op != NULL) {
    memcpy(p, r.op, (size_t)r.opBytes);
    p += r.opBytes;
  }
  *p++ = '\t';
  memcpy(p, r.type, (size_t)r.typeBytes);
  p += r.typeBytes;
  memcpy(p, r.text, (size_t)r.textBytes);
  p += r.textBytes;
  sqlite3_result_text64(ctx, out, (sqlite3_uint64)(p - out), sqlite3_free, SQLITE_UTF8);
}

/*
 * palimpsest_event_page: a page of checked rows in the wire form of palimpsest.v1.ListEventsResponse
 * (src/server/wire/event-encode.ts writes the same bytes from JavaScript: test/integration/sqlite-event-page.test.ts).
 *
 *   SELECT palimpsest_event_page(limit, budget, forward, seq, type, time, data, source_event_seqs,
 *     surface_op, ignorable, scrc, dcrc) FROM (<at most limit + 1 rows, ORDER BY seq [DESC]>)
 *
 * The rows must come in seq order (ascending when `forward`, else descending): a row out of that
 * order makes the result 'F' (the caller then reads the rows itself).
 *
 * Every row given is checked (as palimpsest_event_line); the first `limit` are encoded as
 * `events` fields (tag 1, length, SessionEvent with its data in the json form) while the page's
 * byte estimate (src/server/wire/event-page.ts pageEventBytes: data + type bytes + 11 per cited
 * seq + 64, always at least one event) stays within `budget`. The result is a BLOB:
 *   'P' <count: 8 bytes LE> <next seq: 8 bytes LE, -1 when none> <first seq: 8 bytes LE>
 *       <last seq: 8 bytes LE> (first and last in read order, -1 for an empty page) <the events' bytes>
 *   'D' <1 structural | 2 data> <seq: 8 bytes LE>      the first damaged row
 *   'F'                                               not encodable here (the caller reads rows)
 * 'F' covers what the JavaScript path handles otherwise: rows out of the given order, a seq or a
 * time beyond +-(2^53 - 1), a replace surface op not in its stored form, a cited-seq list that
 * does not decode.
 */
/* Bytes of a 'P' result's head: 'P', count, next seq, first seq, last seq. */
#define PAGE_HEAD 33

struct page {
  unsigned char *buf;
  sqlite3_uint64 len, cap;
  sqlite3_int64 count, nextSeq, lastSeq, rows, used, badSeq, firstEncoded, lastEncoded;
  int status; /* 0 ok, 1/2 damage, 3 fallback, -1 out of memory */
};

#define MAX_SAFE 9007199254740991LL

static int varint_size(sqlite3_uint64 v) {
  int n = 1;
  while (v >= 128) {
    v >>= 7;
    n++;
  }
  return n;
}

static unsigned char *put_varint(unsigned char *p, sqlite3_uint64 v) {
  while (v >= 128) {
    *p++ = (unsigned char)((v & 127) | 128);
    v >>= 7;
  }
  *p++ = (unsigned char)v;
  return p;
}

/* Decodes the stored cited-seq list (codec.ts: a varint, then zigzag varint deltas) into out[]; -1 when it does not decode or leaves the safe range. */
static int decode_seqs(const unsigned char *b, int n, sqlite3_int64 *out, int max) {
  int pos = 0, count = 0;
  sqlite3_int64 previous = 0;
  while (pos < n) {
    sqlite3_uint64 v = 0;
    int shift = 0;
    for (;;) {
      if (pos >= n || shift > 56) return -1;
      unsigned char byte = b[pos++];
      v |= (sqlite3_uint64)(byte & 127) << shift;
      shift += 7;
      if (byte < 128) break;
    }
    if (count == 0) previous = (sqlite3_int64)v;
    else {
      sqlite3_uint64 half = v >> 1;
      if (half > (sqlite3_uint64)MAX_SAFE) return -1;
      previous = (v & 1) ? previous - (sqlite3_int64)half - 1 : previous + (sqlite3_int64)half;
    }
    if (previous < 0 || previous > MAX_SAFE || count >= max) return -1;
    out[count++] = previous;
  }
  return count;
}

/* Parses a number of at most 16 digits at *p (advanced); -1 when there is none. */
static sqlite3_int64 parse_digits(const unsigned char **p, const unsigned char *end) {
  const unsigned char *q = *p;
  sqlite3_int64 v = 0;
  while (q < end && *q >= '0' && *q <= '9' && q - *p < 16) v = v * 10 + (*q++ - '0');
  if (q == *p || (q < end && *q >= '0' && *q <= '9')) return -1;
  *p = q;
  return v;
}

/* The start and end of a stored replace op, `{"op":"replace","start":N,"end":M}` (codec.ts); 0 when it is not exactly that. */
static int parse_replace(const unsigned char *op, int n, sqlite3_int64 *start, sqlite3_int64 *end) {
  static const char a[] = "{\"op\":\"replace\",\"start\":", b[] = ",\"end\":";
  const unsigned char *p = op, *e = op + n;
  if (n < (int)sizeof a - 1 || memcmp(p, a, sizeof a - 1) != 0) return 0;
  p += sizeof a - 1;
  if ((*start = parse_digits(&p, e)) < 0 || e - p < (int)sizeof b - 1 || memcmp(p, b, sizeof b - 1) != 0) return 0;
  p += sizeof b - 1;
  if ((*end = parse_digits(&p, e)) < 0 || p + 1 != e || *p != '}') return 0;
  return *start <= MAX_SAFE && *end <= MAX_SAFE;
}

static int page_reserve(struct page *pg, sqlite3_uint64 more) {
  if (pg->len + more <= pg->cap) return 1;
  sqlite3_uint64 cap = pg->cap < 65536 ? 65536 : pg->cap;
  while (cap < pg->len + more) cap *= 2;
  unsigned char *b = sqlite3_realloc64(pg->buf, cap);
  if (b == NULL) return 0;
  pg->buf = b;
  pg->cap = cap;
  return 1;
}

#define SEQS_ON_STACK 64

/* Encodes one checked row as an `events` field of ListEventsResponse; 0 fallback, -1 no memory, 1 done. */
static int page_encode(struct page *pg, const struct row *r) {
  sqlite3_int64 stackSeqs[SEQS_ON_STACK];
  sqlite3_int64 *seqs = stackSeqs;
  int nSeqs = 0;
  if (r->seqsBytes > 0) {
    /* Each cited seq takes at least one byte of the stored list. */
    if (r->seqsBytes > SEQS_ON_STACK) {
      seqs = sqlite3_malloc64(sizeof(sqlite3_int64) * (sqlite3_uint64)r->seqsBytes);
      if (seqs == NULL) return -1;
    }
    nSeqs = decode_seqs(r->seqs, r->seqsBytes, seqs, r->seqsBytes);
  }
  int result = 0;
  sqlite3_int64 start = 0, end = 0;
  int append = r->op != NULL && r->opBytes == 6 && memcmp(r->op, "append", 6) == 0;
  if (nSeqs < 0 || r->seq > MAX_SAFE || r->time > MAX_SAFE || r->time < -MAX_SAFE || (r->op != NULL && !append && !parse_replace(r->op, r->opBytes, &start, &end))) goto done;
  sqlite3_uint64 packed = 0;
  for (int i = 0; i < nSeqs; i++) packed += (sqlite3_uint64)varint_size((sqlite3_uint64)seqs[i]);
  sqlite3_uint64 seqsMsg = nSeqs == 0 ? 0 : 1 + (sqlite3_uint64)varint_size(packed) + packed;
  sqlite3_uint64 replaceMsg = (start != 0 ? 1 + (sqlite3_uint64)varint_size((sqlite3_uint64)start) : 0) + (end != 0 ? 1 + (sqlite3_uint64)varint_size((sqlite3_uint64)end) : 0);
  sqlite3_uint64 text = (sqlite3_uint64)r->textBytes;
  sqlite3_uint64 dataMsg = 1 + (sqlite3_uint64)varint_size(text) + text;
  sqlite3_uint64 size = 0;
  if (r->seq != 0) size += 1 + (sqlite3_uint64)varint_size((sqlite3_uint64)r->seq);
  /* int64: a negative time is written as its 64-bit two's complement (10 bytes). */
  if (r->time != 0) size += 1 + (sqlite3_uint64)varint_size((sqlite3_uint64)r->time);
  if (r->typeBytes != 0) size += 1 + (sqlite3_uint64)varint_size((sqlite3_uint64)r->typeBytes) + (sqlite3_uint64)r->typeBytes;
  size += 1 + (sqlite3_uint64)varint_size(dataMsg) + dataMsg;
  if (r->hasSeqs) size += 1 + (sqlite3_uint64)varint_size(seqsMsg) + seqsMsg;
  if (append) size += 2;
  else if (r->op != NULL) size += 1 + (sqlite3_uint64)varint_size(replaceMsg) + replaceMsg;
  if (r->ignorable) size += 2;
  if (pg->buf == NULL) pg->len = PAGE_HEAD; /* room for the result's head (page_final) */
  if (!page_reserve(pg, 1 + (sqlite3_uint64)varint_size(size) + size)) {
    result = -1;
    goto done;
  }
  unsigned char *p = pg->buf + pg->len;
  *p++ = 10;
  p = put_varint(p, size);
  if (r->seq != 0) {
    *p++ = 8;
    p = put_varint(p, (sqlite3_uint64)r->seq);
  }
  if (r->time != 0) {
    *p++ = 16;
    p = put_varint(p, (sqlite3_uint64)r->time);
  }
  if (r->typeBytes != 0) {
    *p++ = 26;
    p = put_varint(p, (sqlite3_uint64)r->typeBytes);
    memcpy(p, r->type, (size_t)r->typeBytes);
    p += r->typeBytes;
  }
  *p++ = 34;
  p = put_varint(p, dataMsg);
  *p++ = 10;
  p = put_varint(p, text);
  memcpy(p, r->text, (size_t)text);
  p += text;
  if (r->hasSeqs) {
    *p++ = 42;
    p = put_varint(p, seqsMsg);
    if (nSeqs != 0) {
      *p++ = 10;
      p = put_varint(p, packed);
      for (int i = 0; i < nSeqs; i++) p = put_varint(p, (sqlite3_uint64)seqs[i]);
    }
  }
  if (append) {
    *p++ = 50;
    *p++ = 0;
  } else if (r->op != NULL) {
    *p++ = 58;
    p = put_varint(p, replaceMsg);
    if (start != 0) {
      *p++ = 8;
      p = put_varint(p, (sqlite3_uint64)start);
    }
    if (end != 0) {
      *p++ = 16;
      p = put_varint(p, (sqlite3_uint64)end);
    }
  }
  if (r->ignorable) {
    *p++ = 64;
    *p++ = 1;
  }
  pg->len = (sqlite3_uint64)(p - pg->buf);
  if (pg->count == 0) pg->firstEncoded = r->seq;
  pg->lastEncoded = r->seq;
  pg->count++;
  result = 1;
done:
  if (seqs != stackSeqs) sqlite3_free(seqs);
  return result;
}

static void page_step(sqlite3_context *ctx, int argc, sqlite3_value **a) {
  (void)argc;
  struct page *pg = sqlite3_aggregate_context(ctx, sizeof(struct page));
  if (pg == NULL) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  if (pg->rows == 0) pg->nextSeq = -1;
  pg->rows++;
  if (pg->status != 0) return;
  sqlite3_int64 limit = sqlite3_value_int64(a[0]), budget = sqlite3_value_int64(a[1]);
  int forward = sqlite3_value_int(a[2]) != 0;
  struct row r;
  int bad = check_row(a + 3, &r);
  if (bad != 0) {
    pg->status = bad;
    pg->badSeq = r.seq;
    return;
  }
  if (pg->rows > 1 && (forward ? r.seq <= pg->lastSeq : r.seq >= pg->lastSeq)) {
    pg->status = 3;
    return;
  }
  pg->lastSeq = r.seq;
  if (pg->nextSeq >= 0) return; /* the page is complete; the rows after it are only checked */
  if (pg->count >= limit) {
    pg->nextSeq = r.seq;
    return;
  }
  /* src/app/store-port.ts pageEventBytes: data + type bytes + 11 per cited seq + 64. */
  sqlite3_int64 cited = 0;
  for (int i = 0; i < r.seqsBytes; i++)
    if (r.seqs[i] < 128) cited++;
  sqlite3_int64 size = (sqlite3_int64)r.textBytes + r.typeBytes + 11 * cited + 64;
  if (pg->count > 0 && pg->used + size > budget) {
    pg->nextSeq = r.seq;
    return;
  }
  pg->used += size;
  int done = page_encode(pg, &r);
  if (done <= 0) pg->status = done < 0 ? -1 : 3;
}

static void put_le64(unsigned char *p, sqlite3_int64 v) {
  sqlite3_uint64 u = (sqlite3_uint64)v;
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(u >> (8 * i));
}

static void page_final(sqlite3_context *ctx) {
  struct page *pg = sqlite3_aggregate_context(ctx, 0);
  unsigned char head[PAGE_HEAD];
  if (pg != NULL && pg->status == -1) {
    sqlite3_free(pg->buf);
    sqlite3_result_error_nomem(ctx);
    return;
  }
  if (pg != NULL && pg->status != 0) {
    sqlite3_free(pg->buf);
    int n = 1;
    if (pg->status == 3) head[0] = 'F';
    else {
      head[0] = 'D';
      head[1] = (unsigned char)pg->status;
      put_le64(head + 2, pg->badSeq);
      n = 10;
    }
    sqlite3_result_blob(ctx, head, n, SQLITE_TRANSIENT);
    return;
  }
  if (pg == NULL || pg->count == 0) {
    head[0] = 'P';
    put_le64(head + 1, 0);
    put_le64(head + 9, pg == NULL ? -1 : pg->nextSeq);
    put_le64(head + 17, -1);
    put_le64(head + 25, -1);
    if (pg != NULL) sqlite3_free(pg->buf);
    sqlite3_result_blob(ctx, head, PAGE_HEAD, SQLITE_TRANSIENT);
    return;
  }
  /* The events were written after the PAGE_HEAD bytes left for the head (page_encode). */
  pg->buf[0] = 'P';
  put_le64(pg->buf + 1, pg->count);
  put_le64(pg->buf + 9, pg->nextSeq);
  put_le64(pg->buf + 17, pg->firstEncoded);
  put_le64(pg->buf + 25, pg->lastEncoded);
  sqlite3_result_blob64(ctx, pg->buf, pg->len, sqlite3_free);
}

/*
 * palimpsest_structure: the structural load of a whole log (the cold open, src/store/sqlite/structure-columns.ts)
 * without a JS value per row.
 *
 *   SELECT palimpsest_structure(seq, type, source_event_seqs, surface_op, ignorable, scrc, dcrc)
 *     FROM events WHERE session_id = ? AND seq >= 0 ORDER BY seq
 *
 * Every row's scrc is checked (as check_row does) and the session digest chained over (scrc, dcrc)
 * in seq order (integrity.ts digestStep). The result is a BLOB:
 *   'S' <7 zero bytes> <count: u32> <digest: u32> <distinct types: u32> <general rows: u32>
 *     <seqs: count f64> <type ids: count u32> <kinds: count u8>
 *     <types: (u32 byte length, UTF-8 bytes) each>
 *     <general rows: (u32 index, i32 op length or -1, op bytes, i32 cited-seqs length or -1, its bytes, u8 ignorable) each>
 *   'D' <1> <seq: 8 bytes LE>      the first row failing its structural checksum
 *   'F'                            not representable here (the caller reads the rows itself)
 * kinds: 0 no surface op, no cited seqs, not ignorable; 1 surface op 'append' and nothing else;
 * 2 any other row (its columns among the general rows). All numbers little-endian. 'F' covers a
 * seq beyond 2^53 - 1, rows out of ascending order and more than 2^32 - 1 rows or bytes.
 */
struct buf {
  unsigned char *p;
  sqlite3_uint64 len, cap;
};

/* Room for n more bytes; 0 when out of memory. */
static int buf_room(struct buf *b, sqlite3_uint64 n) {
  if (b->len + n <= b->cap) return 1;
  sqlite3_uint64 cap = b->cap ? b->cap : 4096;
  while (cap < b->len + n) cap *= 2;
  unsigned char *q = sqlite3_realloc64(b->p, cap);
  if (q == NULL) return 0;
  b->p = q;
  b->cap = cap;
  return 1;
}

static void put_le32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

struct structure {
  struct buf seqs, tids, kinds, types, general;
  /* Open-addressing table of type ids + 1 by the type's bytes (0: empty). */
  uint32_t *slots;
  uint32_t nslots, ntypes, ngeneral, digest, count;
  /* Byte offset in `types` of each type's entry (its u32 length, then its bytes). */
  struct buf offsets;
  sqlite3_int64 last, badSeq;
  int lastTid;
  int status; /* 0 ok, 1 structural damage, 3 fallback, -1 out of memory */
};

static uint32_t type_hash(const unsigned char *t, int n) {
  uint32_t h = 2166136261u;
  for (int i = 0; i < n; i++) h = (h ^ t[i]) * 16777619u;
  return h;
}

/* The id of type t (interned on first sight); -1 when out of memory. */
static int type_id(struct structure *s, const unsigned char *t, int n) {
  if (s->lastTid >= 0) {
    uint32_t off = ((uint32_t *)s->offsets.p)[s->lastTid];
    uint32_t len;
    memcpy(&len, s->types.p + off, 4);
    if ((int)len == n && memcmp(s->types.p + off + 4, t, (size_t)n) == 0) return s->lastTid;
  }
  if ((s->ntypes + 1) * 2 > s->nslots) {
    uint32_t nslots = s->nslots ? s->nslots * 2 : 64;
    uint32_t *slots = sqlite3_malloc64((sqlite3_uint64)nslots * 4);
    if (slots == NULL) return -1;
    memset(slots, 0, (size_t)nslots * 4);
    for (uint32_t id = 0; id < s->ntypes; id++) {
      uint32_t off = ((uint32_t *)s->offsets.p)[id], len;
      memcpy(&len, s->types.p + off, 4);
      uint32_t k = type_hash(s->types.p + off + 4, (int)len) & (nslots - 1);
      while (slots[k] != 0) k = (k + 1) & (nslots - 1);
      slots[k] = id + 1;
    }
    sqlite3_free(s->slots);
    s->slots = slots;
    s->nslots = nslots;
  }
  uint32_t k = type_hash(t, n) & (s->nslots - 1);
  while (s->slots[k] != 0) {
    uint32_t id = s->slots[k] - 1, off = ((uint32_t *)s->offsets.p)[id], len;
    memcpy(&len, s->types.p + off, 4);
    if ((int)len == n && memcmp(s->types.p + off + 4, t, (size_t)n) == 0) return s->lastTid = (int)id;
    k = (k + 1) & (s->nslots - 1);
  }
  if (!buf_room(&s->offsets, 4) || !buf_room(&s->types, 4 + (sqlite3_uint64)n)) return -1;
  uint32_t off = (uint32_t)s->types.len;
  memcpy(s->offsets.p + s->offsets.len, &off, 4);
  s->offsets.len += 4;
  put_le32(s->types.p + s->types.len, (uint32_t)n);
  memcpy(s->types.p + s->types.len + 4, t, (size_t)n);
  s->types.len += 4 + (sqlite3_uint64)n;
  s->slots[k] = s->ntypes + 1;
  return s->lastTid = (int)s->ntypes++;
}

static void structure_step(sqlite3_context *ctx, int argc, sqlite3_value **a) {
  (void)argc;
  struct structure *s = sqlite3_aggregate_context(ctx, sizeof(struct structure));
  if (s == NULL) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  if (s->count == 0 && s->status == 0 && s->slots == NULL) {
    s->last = -1;
    s->lastTid = -1;
  }
  if (s->status != 0) return;
  /* (seq, type, source_event_seqs, surface_op, ignorable, scrc, dcrc) */
  sqlite3_int64 seq = -1, ign = 0, scrc = 0, dcrc = 0;
  int typeType = sqlite3_value_type(a[1]), seqsType = sqlite3_value_type(a[2]), opType = sqlite3_value_type(a[3]);
  int ignNull = sqlite3_value_type(a[4]) == SQLITE_NULL;
  int ok = integer_of(a[0], &seq) && integer_of(a[5], &scrc) && integer_of(a[6], &dcrc) && typeType == SQLITE_TEXT &&
           (seqsType == SQLITE_NULL || seqsType == SQLITE_BLOB) && (opType == SQLITE_NULL || opType == SQLITE_TEXT) &&
           (ignNull || integer_of(a[4], &ign)) && !(opType == SQLITE_TEXT && sqlite3_value_bytes(a[3]) == 0);
  if (!ok) {
    s->status = 1;
    s->badSeq = seq;
    return;
  }
  if (seq < 0 || seq > MAX_SAFE || seq <= s->last || s->count == 0xFFFFFFFFu) {
    s->status = 3;
    return;
  }
  const unsigned char *type = sqlite3_value_text(a[1]);
  int typeBytes = sqlite3_value_bytes(a[1]);
  const unsigned char *seqs = seqsType == SQLITE_BLOB ? sqlite3_value_blob(a[2]) : NULL;
  int seqsBytes = seqsType == SQLITE_BLOB ? sqlite3_value_bytes(a[2]) : 0;
  const unsigned char *op = opType == SQLITE_TEXT ? sqlite3_value_text(a[3]) : NULL;
  int opBytes = op != NULL ? sqlite3_value_bytes(a[3]) : 0;
  if (type == NULL || (seqsBytes > 0 && seqs == NULL) || (opType == SQLITE_TEXT && op == NULL)) {
    s->status = -1;
    return;
  }
  if (structural_crc(seq, op, opBytes, seqsType == SQLITE_BLOB, seqs, seqsBytes, !ignNull, ign, type, typeBytes) != scrc || !valid_utf8(type, typeBytes)) {
    s->status = 1;
    s->badSeq = seq;
    return;
  }
  /* digest' = crcWord(crcWord(digest, scrc), dcrc): raw table steps over each word's 4 LE bytes */
  uint32_t d = s->digest, w = (uint32_t)scrc;
  for (int i = 0; i < 4; i++) d = crc_byte(d, (unsigned char)(w >> (8 * i)));
  w = (uint32_t)dcrc;
  for (int i = 0; i < 4; i++) d = crc_byte(d, (unsigned char)(w >> (8 * i)));
  s->digest = d;
  int tid = type_id(s, type, typeBytes);
  if (tid < 0 || !buf_room(&s->seqs, 8) || !buf_room(&s->tids, 4) || !buf_room(&s->kinds, 1)) {
    s->status = -1;
    return;
  }
  double sd = (double)seq;
  memcpy(s->seqs.p + s->seqs.len, &sd, 8); /* IEEE-754 little-endian on every target built for */
  s->seqs.len += 8;
  put_le32(s->tids.p + s->tids.len, (uint32_t)tid);
  s->tids.len += 4;
  unsigned char kind = 2;
  if (seqsType != SQLITE_BLOB && ignNull) {
    if (op == NULL) kind = 0;
    else if (opBytes == 6 && memcmp(op, "append", 6) == 0) kind = 1;
  }
  s->kinds.p[s->kinds.len++] = kind;
  if (kind == 2) {
    if (!buf_room(&s->general, 4 + 4 + (sqlite3_uint64)opBytes + 4 + (sqlite3_uint64)seqsBytes + 1)) {
      s->status = -1;
      return;
    }
    unsigned char *p = s->general.p + s->general.len;
    put_le32(p, s->count);
    put_le32(p + 4, op == NULL ? 0xFFFFFFFFu : (uint32_t)opBytes);
    p += 8;
    if (op != NULL) memcpy(p, op, (size_t)opBytes), p += opBytes;
    put_le32(p, seqsType == SQLITE_BLOB ? (uint32_t)seqsBytes : 0xFFFFFFFFu);
    p += 4;
    if (seqsBytes > 0) memcpy(p, seqs, (size_t)seqsBytes), p += seqsBytes;
    *p++ = (unsigned char)!ignNull;
    s->general.len = (sqlite3_uint64)(p - s->general.p);
    s->ngeneral++;
  }
  s->last = seq;
  s->count++;
}

static void structure_free(struct structure *s) {
  sqlite3_free(s->seqs.p);
  sqlite3_free(s->tids.p);
  sqlite3_free(s->kinds.p);
  sqlite3_free(s->types.p);
  sqlite3_free(s->general.p);
  sqlite3_free(s->offsets.p);
  sqlite3_free(s->slots);
}

#define STRUCTURE_HEAD 24

static void structure_final(sqlite3_context *ctx) {
  struct structure *s = sqlite3_aggregate_context(ctx, 0);
  struct structure empty;
  if (s == NULL) {
    memset(&empty, 0, sizeof empty);
    s = &empty;
  }
  unsigned char head[10];
  if (s->status == -1) {
    structure_free(s);
    sqlite3_result_error_nomem(ctx);
    return;
  }
  if (s->status != 0) {
    int n = 1;
    if (s->status == 3) head[0] = 'F';
    else {
      head[0] = 'D';
      head[1] = 1;
      put_le64(head + 2, s->badSeq);
      n = 10;
    }
    structure_free(s);
    sqlite3_result_blob(ctx, head, n, SQLITE_TRANSIENT);
    return;
  }
  sqlite3_uint64 size = STRUCTURE_HEAD + s->seqs.len + s->tids.len + s->kinds.len + s->types.len + s->general.len;
  unsigned char *out = size > 0xFFFFFFFFu ? NULL : sqlite3_malloc64(size);
  if (out == NULL) {
    structure_free(s);
    if (size > 0xFFFFFFFFu) sqlite3_result_blob(ctx, "F", 1, SQLITE_TRANSIENT);
    else sqlite3_result_error_nomem(ctx);
    return;
  }
  memset(out, 0, STRUCTURE_HEAD);
  out[0] = 'S';
  put_le32(out + 8, s->count);
  put_le32(out + 12, s->digest);
  put_le32(out + 16, s->ntypes);
  put_le32(out + 20, s->ngeneral);
  unsigned char *p = out + STRUCTURE_HEAD;
  struct buf *parts[] = {&s->seqs, &s->tids, &s->kinds, &s->types, &s->general};
  for (int i = 0; i < 5; i++) {
    if (parts[i]->len > 0) memcpy(p, parts[i]->p, (size_t)parts[i]->len);
    p += parts[i]->len;
  }
  structure_free(s);
  sqlite3_result_blob64(ctx, out, size, sqlite3_free);
}

/*
 * The checksums of a row being written, for the writer's INSERT (src/store/sqlite/sql-checksums.ts):
 *   palimpsest_scrc(seq, surface_op, source_event_seqs, ignorable, type) -> scrc
 *   palimpsest_dcrc(time, data) -> dcrc
 * over the same canonical inputs as integrity.ts structuralCrc / dataCrc (and as check_row checks
 * them), so a row written with them verifies as one written with the JavaScript checksums. A
 * value of a storage class the row cannot have (the store binds seq, time and ignorable as
 * numbers, type, data and surface_op as text, source_event_seqs as a blob) is an error: the
 * INSERT fails rather than storing a checksum nothing could reproduce.
 */
static void scrc_fn(sqlite3_context *ctx, int argc, sqlite3_value **a) {
  (void)argc;
  sqlite3_int64 seq, ign = 0;
  int opType = sqlite3_value_type(a[1]), seqsType = sqlite3_value_type(a[2]), ignNull = sqlite3_value_type(a[3]) == SQLITE_NULL;
  if (!integer_of(a[0], &seq) || !(opType == SQLITE_NULL || opType == SQLITE_TEXT) || !(seqsType == SQLITE_NULL || seqsType == SQLITE_BLOB) ||
      !(ignNull || integer_of(a[3], &ign)) || sqlite3_value_type(a[4]) != SQLITE_TEXT) {
    sqlite3_result_error(ctx, "palimpsest_scrc: not an event row's structural values", -1);
    return;
  }
  const unsigned char *op = opType == SQLITE_TEXT ? sqlite3_value_text(a[1]) : NULL;
  int opBytes = op != NULL ? sqlite3_value_bytes(a[1]) : 0;
  const unsigned char *seqs = seqsType == SQLITE_BLOB ? sqlite3_value_blob(a[2]) : NULL;
  int seqsBytes = seqsType == SQLITE_BLOB ? sqlite3_value_bytes(a[2]) : 0;
  const unsigned char *type = sqlite3_value_text(a[4]);
  int typeBytes = sqlite3_value_bytes(a[4]);
  if (type == NULL || (opType == SQLITE_TEXT && op == NULL) || (seqsBytes > 0 && seqs == NULL)) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  /* What check_row reads as structural damage is not written: an empty surface_op, a type that is not well-formed UTF-8. */
  if ((opType == SQLITE_TEXT && opBytes == 0) || !valid_utf8(type, typeBytes)) {
    sqlite3_result_error(ctx, "palimpsest_scrc: an empty surface_op or a type that is not UTF-8", -1);
    return;
  }
  sqlite3_result_int64(ctx, structural_crc(seq, op, opBytes, seqsType == SQLITE_BLOB, seqs, seqsBytes, !ignNull, ign, type, typeBytes));
}

static void dcrc_fn(sqlite3_context *ctx, int argc, sqlite3_value **a) {
  (void)argc;
  sqlite3_int64 time;
  if (!integer_of(a[0], &time) || sqlite3_value_type(a[1]) != SQLITE_TEXT) {
    sqlite3_result_error(ctx, "palimpsest_dcrc: not an event row's time and data", -1);
    return;
  }
  const unsigned char *text = sqlite3_value_text(a[1]);
  int textBytes = sqlite3_value_bytes(a[1]);
  if (text == NULL) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  sqlite3_result_int64(ctx, data_crc(time, text, textBytes));
}

/*
 * palimpsest_digest(start, seq, scrc, dcrc)   (aggregate)
 *   -> the session digest (integrity.ts digestStep) chained from `start` over the rows' checksums;
 *      NULL for no rows (the digest is then `start`). The rows must come in ascending seq order
 *      (the caller selects them ORDER BY seq from the table's key order, so SQLite needs no
 *      sorter); a row out of that order is an error, never a digest of another order.
 */
struct digest {
  uint32_t d;
  sqlite3_int64 last;
  int started, bad;
};

static void digest_step(sqlite3_context *ctx, int argc, sqlite3_value **a) {
  (void)argc;
  struct digest *g = sqlite3_aggregate_context(ctx, sizeof *g);
  if (g == NULL) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  sqlite3_int64 start = 0, seq, scrc, dcrc;
  if (g->bad) return;
  if (!integer_of(a[1], &seq) || !integer_of(a[2], &scrc) || !integer_of(a[3], &dcrc) || (!g->started && !integer_of(a[0], &start)) ||
      (g->started && seq <= g->last)) {
    g->bad = 1;
    return;
  }
  if (!g->started) {
    g->d = (uint32_t)start;
    g->started = 1;
  }
  g->last = seq;
  /* digest' = crcWord(crcWord(digest, scrc), dcrc): raw table steps over each word's 4 LE bytes */
  uint32_t d = g->d, w = (uint32_t)scrc;
  for (int i = 0; i < 4; i++) d = crc_byte(d, (unsigned char)(w >> (8 * i)));
  w = (uint32_t)dcrc;
  for (int i = 0; i < 4; i++) d = crc_byte(d, (unsigned char)(w >> (8 * i)));
  g->d = d;
}

static void digest_final(sqlite3_context *ctx) {
  struct digest *g = sqlite3_aggregate_context(ctx, 0);
  if (g != NULL && g->bad) sqlite3_result_error(ctx, "palimpsest_digest: rows out of seq order, or a value that is not an integer", -1);
  else if (g != NULL && g->started) sqlite3_result_int64(ctx, (sqlite3_int64)g->d);
  else sqlite3_result_null(ctx);
}

/* 1 when the hardware CRC instruction is in use (the server logs it at start). */
static void hw_fn(sqlite3_context *ctx, int argc, sqlite3_value **a) {
  (void)argc;
  (void)a;
  sqlite3_result_int(ctx, crc_feed != crc_soft);
}

static void format_fn(sqlite3_context *ctx, int argc, sqlite3_value **a) {
  (void)argc;
  (void)a;
  sqlite3_result_int(ctx, LINE_FORMAT);
}

static void page_format_fn(sqlite3_context *ctx, int argc, sqlite3_value **a) {
  (void)argc;
  (void)a;
  sqlite3_result_int(ctx, EVENT_PAGE_FORMAT);
}

/* The tables and the CRC routine, chosen once per process (every connection loads the extension). */
static void init_once(void) {
  init_table();
#ifdef HAVE_HW
  __builtin_cpu_init();
  if (__builtin_cpu_supports("sse4.2")) crc_feed = crc_hw;
#endif
}

int sqlite3_palimpsestchecksums_init(sqlite3 *db, char **err, const sqlite3_api_routines *api) {
  (void)err;
  SQLITE_EXTENSION_INIT2(api);
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, init_once);
  const int flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS;
  int rc = sqlite3_create_function(db, "palimpsest_event_line", 9, flags, NULL, event_line, NULL, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_create_function(db, "palimpsest_event_page", 12, flags, NULL, NULL, page_step, page_final);
  if (rc == SQLITE_OK) rc = sqlite3_create_function(db, "palimpsest_structure", 7, flags, NULL, NULL, structure_step, structure_final);
  if (rc == SQLITE_OK) rc = sqlite3_create_function(db, "palimpsest_scrc", 5, flags, NULL, scrc_fn, NULL, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_create_function(db, "palimpsest_dcrc", 2, flags, NULL, dcrc_fn, NULL, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_create_function(db, "palimpsest_digest", 4, flags, NULL, NULL, digest_step, digest_final);
  if (rc == SQLITE_OK) rc = sqlite3_create_function(db, "palimpsest_checksums_format", 0, flags, NULL, format_fn, NULL, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_create_function(db, "palimpsest_event_page_format", 0, flags, NULL, page_format_fn, NULL, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_create_function(db, "palimpsest_checksums_hw", 0, SQLITE_UTF8 | SQLITE_INNOCUOUS, NULL, hw_fn, NULL, NULL);
  return rc;
}
