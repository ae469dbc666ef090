/**
 * `grpc-message` percent-encoding (gRPC over HTTP/2, "Percent-Encoded"): the UTF-8 bytes of the
 * message, each byte outside printable ASCII (0x20-0x7E) and the byte '%' itself written as %XX.
 * An ASCII message without '%' (nearly every status) is returned as it is.
 */

const HEX = '0123456789ABCDEF';

/** `s` percent-encoded for the grpc-message trailer. */
export function percentEncode(s: string): string {
  let i = 0;
  for (; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x25) break;
  }
  if (i === s.length) return s;
  const bytes = Buffer.from(s, 'utf8');
  let out = '';
  for (const b of bytes) {
    out += b < 0x20 || b > 0x7e || b === 0x25 ? `%${HEX[b >> 4]}${HEX[b & 15]}` : String.fromCharCode(b);
  }
  return out;
}
