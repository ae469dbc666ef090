#!/usr/bin/env node
// A protoc/buf plugin that writes the whole module (every file of the request, imports included,
// in dependency order) as one FileDescriptorSet, `descriptor.binpb`, for server reflection.
// It copies the request's FileDescriptorProto bytes as they are (without source info), so it needs
// no protobuf library: CodeGeneratorRequest.proto_file (field 15) -> FileDescriptorSet.file (1).
import { readFileSync, writeSync } from 'node:fs';

const input = readFileSync(0);

function varint(buf, pos) {
  let value = 0n;
  let shift = 0n;
  for (;;) {
    const b = buf[pos++];
    value |= BigInt(b & 0x7f) << shift;
    if ((b & 0x80) === 0) return [value, pos];
    shift += 7n;
  }
}
function encodeVarint(n) {
  const out = [];
  let v = BigInt(n);
  while (v >= 0x80n) {
    out.push(Number((v & 0x7fn) | 0x80n));
    v >>= 7n;
  }
  out.push(Number(v));
  return Buffer.from(out);
}
/** Splits a message into [fieldNumber, wireType, rawBytesOfValue, wholeFieldBytes]. */
function* fields(buf) {
  let pos = 0;
  while (pos < buf.length) {
    const start = pos;
    const [key, p1] = varint(buf, pos);
    const field = Number(key >> 3n);
    const wire = Number(key & 7n);
    pos = p1;
    let value;
    if (wire === 0) { const [, p2] = varint(buf, pos); value = buf.subarray(pos, p2); pos = p2; }
    else if (wire === 1) { value = buf.subarray(pos, pos + 8); pos += 8; }
    else if (wire === 5) { value = buf.subarray(pos, pos + 4); pos += 4; }
    else if (wire === 2) { const [len, p2] = varint(buf, pos); value = buf.subarray(p2, p2 + Number(len)); pos = p2 + Number(len); }
    else throw new Error(`unsupported wire type ${wire}`);
    yield [field, wire, value, buf.subarray(start, pos)];
  }
}
function lengthDelimited(field, bytes) {
  return Buffer.concat([encodeVarint((field << 3) | 2), encodeVarint(bytes.length), bytes]);
}

const files = [];
for (const [field, wire, value] of fields(input)) {
  if (field !== 15 || wire !== 2) continue;
  // Drop source_code_info (FileDescriptorProto field 9): reflection needs the schema only.
  const kept = [];
  for (const [f, , , whole] of fields(value)) if (f !== 9) kept.push(whole);
  files.push(lengthDelimited(1, Buffer.concat(kept)));
}
const set = Buffer.concat(files);
const file = Buffer.concat([lengthDelimited(1, Buffer.from('descriptor.binpb')), lengthDelimited(15, set)]);
// supported_features = FEATURE_PROTO3_OPTIONAL (1)
const response = Buffer.concat([Buffer.from([0x10, 0x01]), lengthDelimited(15, file)]);
writeSync(1, response);
