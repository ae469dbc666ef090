/*
 * Palimpsest's SQLite extension: the row checksums of src/store/sqlite/integrity.ts computed over
 * the bytes SQLite already holds, so verifying a returned row costs no JS string walk.
 * Linux and macOS (scripts/build-native.mjs builds it; src/store/sqlite/native-checksums.ts loads it).
 *
 * SQL functions (deterministic, innocuous):
 *   palimpsest_event_line(seq, type, time, data, source_event_seqs, surface_op, ignorable, scrc, dcrc)
 *     -> the row checked and written as one text value (see event_line below)
 *   palimpsest_checksums_format() -> LINE_FORMAT, the line format version (the loader refuses any
 *     other: a stale build never feeds a newer decoder)
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
 * The version of event_line's format and of what it accepts; row-codec.ts LINE_FORMAT must be the
 * same. Bump it for any change to either (a build of another version is not used).
 */
#define LINE_FORMAT 2

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

/*
 * palimpsest_event_line(seq, type, time, data, source_event_seqs, surface_op, ignorable, scrc, dcrc):
 * the row checked and written as one text value, so a read materialises one JS string per row
 * instead of eight values and an array (src/store/sqlite/row-codec.ts decodeEventLine):
 *   <seq>,<time>,<'1' or ''>,<UTF-16 length of type>,<UTF-8 bytes of data>,<HEX(source_event_seqs) or '-'>,<surface_op or ''>\t<type><data>
 * or, for a row that fails a checksum, `!<1 structural | 2 data>,<seq>`. The line is written
 * first and both checksums are computed from its pieces (the canonical inputs of integrity.ts
 * reuse the same digits, hex and text), so nothing is formatted twice.
 */
static void event_line(sqlite3_context *ctx, int argc, sqlite3_value **a) {
  (void)argc;
  sqlite3_int64 seq = -1, time = 0, ign = 0, scrc = 0, dcrc = 0;
  int typeType = sqlite3_value_type(a[1]), textType = sqlite3_value_type(a[3]);
  int seqsType = sqlite3_value_type(a[4]), opType = sqlite3_value_type(a[5]), ignNull = sqlite3_value_type(a[6]) == SQLITE_NULL;
  /* A value of a storage class the schema forbids (a flipped record-header bit can turn TEXT into
   * BLOB) fails the check its column belongs to; an empty surface_op (never written: NULL is
   * "none") is structural damage even though its canonical text equals NULL's. */
  int structuralOk = integer_of(a[0], &seq) && integer_of(a[7], &scrc) && typeType == SQLITE_TEXT &&
                     (seqsType == SQLITE_NULL || seqsType == SQLITE_BLOB) && (opType == SQLITE_NULL || opType == SQLITE_TEXT) &&
                     (ignNull || integer_of(a[6], &ign)) && !(opType == SQLITE_TEXT && sqlite3_value_bytes(a[5]) == 0);
  int dataOk = integer_of(a[2], &time) && integer_of(a[8], &dcrc) && textType == SQLITE_TEXT;
  int ok = structuralOk && dataOk;
  int bad = structuralOk ? (dataOk ? 0 : 2) : 1;
  char *out = NULL;
  char *p = NULL;
  if (ok) {
    const unsigned char *type = sqlite3_value_text(a[1]);
    int typeBytes = sqlite3_value_bytes(a[1]);
    const unsigned char *text = sqlite3_value_text(a[3]);
    int textBytes = sqlite3_value_bytes(a[3]);
    const unsigned char *seqs = seqsType == SQLITE_BLOB ? sqlite3_value_blob(a[4]) : NULL;
    int seqsBytes = seqsType == SQLITE_BLOB ? sqlite3_value_bytes(a[4]) : 0;
    const unsigned char *op = opType == SQLITE_TEXT ? sqlite3_value_text(a[5]) : NULL;
    int opBytes = op != NULL ? sqlite3_value_bytes(a[5]) : 0;
    if (type == NULL || text == NULL || (seqsBytes > 0 && seqs == NULL) || (opType == SQLITE_TEXT && op == NULL)) {
      sqlite3_result_error_nomem(ctx);
      return;
    }
    sqlite3_uint64 size = 4 * 24 + 16 + (sqlite3_uint64)seqsBytes * 2 + (sqlite3_uint64)opBytes + (sqlite3_uint64)typeBytes + (sqlite3_uint64)textBytes;
    out = sqlite3_malloc64(size);
    if (out == NULL) {
      sqlite3_result_error_nomem(ctx);
      return;
    }
    char *seqAt = out;
    p = put_int(out, seq);
    char *seqEnd = p;
    *p++ = ',';
    char *timeAt = p;
    p = put_int(p, time);
    char *timeEnd = p;
    *p++ = ',';
    if (!ignNull) *p++ = '1';
    *p++ = ',';
    p = put_int(p, utf16_length(type, typeBytes));
    *p++ = ',';
    p = put_int(p, textBytes);
    *p++ = ',';
    char *hexAt = p;
    if (seqs == NULL && seqsType == SQLITE_NULL) *p++ = '-';
    else {
      static const char digits[] = "0123456789ABCDEF";
      for (int i = 0; i < seqsBytes; i++) {
        *p++ = digits[seqs[i] >> 4];
        *p++ = digits[seqs[i] & 15];
      }
    }
    char *hexEnd = p;
    *p++ = ',';
    if (op != NULL) {
      memcpy(p, op, (size_t)opBytes);
      p += opBytes;
    }
    *p++ = '\t';
    char *typeAt = p;
    memcpy(p, type, (size_t)typeBytes);
    p += typeBytes;
    char *textAt = p;
    memcpy(p, text, (size_t)textBytes);
    p += textBytes;
    /* scrc over `<seq>:<surface_op or ''>\t<HEX or '-'>\t<ignorable or ''>\t<type>` */
    uint32_t c = crc_feed(0xFFFFFFFFu, (const unsigned char *)seqAt, (size_t)(seqEnd - seqAt));
    c = crc_byte(c, ':');
    if (op != NULL) c = crc_feed(c, op, (size_t)opBytes);
    c = crc_byte(c, '\t');
    c = crc_feed(c, (const unsigned char *)hexAt, (size_t)(hexEnd - hexAt));
    c = crc_byte(c, '\t');
    if (!ignNull) {
      char digits[24];
      c = crc_feed(c, (const unsigned char *)digits, (size_t)(put_int(digits, ign) - digits));
    }
    c = crc_byte(c, '\t');
    c = crc_feed(c, (const unsigned char *)typeAt, (size_t)typeBytes);
    /* A type that is not well-formed UTF-8 was never written (types are well-formed strings):
     * damage, even with a matching checksum, and its UTF-16 length would be wrong. */
    if ((sqlite3_int64)(c ^ 0xFFFFFFFFu) != scrc || !valid_utf8(type, typeBytes)) bad = 1;
    else {
      /* dcrc over `<time>\t<data>` */
      c = crc_feed(0xFFFFFFFFu, (const unsigned char *)timeAt, (size_t)(timeEnd - timeAt));
      c = crc_byte(c, '\t');
      c = crc_feed(c, (const unsigned char *)textAt, (size_t)textBytes);
      if ((sqlite3_int64)(c ^ 0xFFFFFFFFu) != dcrc) bad = 2;
    }
  }
  if (bad) {
    sqlite3_free(out);
    char err[32];
    char *q = err;
    *q++ = '!';
    *q++ = (char)('0' + bad);
    *q++ = ',';
    q = put_int(q, seq);
    sqlite3_result_text(ctx, err, (int)(q - err), SQLITE_TRANSIENT);
    return;
  }
  sqlite3_result_text64(ctx, out, (sqlite3_uint64)(p - out), sqlite3_free, SQLITE_UTF8);
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
  if (rc == SQLITE_OK) rc = sqlite3_create_function(db, "palimpsest_checksums_format", 0, flags, NULL, format_fn, NULL, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_create_function(db, "palimpsest_checksums_hw", 0, SQLITE_UTF8 | SQLITE_INNOCUOUS, NULL, hw_fn, NULL, NULL);
  return rc;
}
