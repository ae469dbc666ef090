/**
 * Cost of the SQLite store's integrity checks (issue #17): the two CRC-32C values computed per
 * event on write (encodeEvents) and verified per row on read, against node:crypto's sha256 for
 * comparison. Prints ns per event for small, typical and large events.
 *
 *   npx tsx bench/checksum.bench.ts [--quick]
 */
import { createHash } from 'node:crypto';
import { dataCrc, structuralCrc } from '../src/store/sqlite/integrity.js';
import { encodeSeqs } from '../src/store/sqlite/codec.js';

const quick = process.argv.includes('--quick');
const N = quick ? 20_000 : 200_000;

const sizes: [string, string][] = [
  ['small (60 B)', JSON.stringify({ turn: 1, step: 2, chunk: { type: 'text-delta', text: 'ok' } })],
  ['typical (600 B)', JSON.stringify({ role: 'assistant', content: 'x'.repeat(420) + 'é'.repeat(50), tool: { name: 'bash', args: { cmd: 'ls -la /tmp' } } })],
  ['large (16 KiB)', JSON.stringify({ output: 'y'.repeat(16_000) })],
];
const seqs = encodeSeqs([1, 2, 3]);

function time(fn: (i: number) => number): number {
  let acc = 0;
  for (let i = 0; i < N / 10; i++) acc ^= fn(i);
  const t = process.hrtime.bigint();
  for (let i = 0; i < N; i++) acc ^= fn(i);
  const ns = Number(process.hrtime.bigint() - t) / N;
  if (acc === 0.5) console.log('');
  return ns;
}

console.log('| event | bytes | CRC-32C both (ns) | ns/byte | sha256 of data (ns) |');
console.log('|---|---:|---:|---:|---:|');
for (const [label, data] of sizes) {
  const crc = time((i) => structuralCrc(i, 'append', seqs, null, 'assistant/message') ^ dataCrc(1_700_000_000_000 + i, data));
  const sha = time(() => createHash('sha256').update(data).digest().readUInt32LE(0));
  const bytes = Buffer.byteLength(data);
  console.log(`| ${label} | ${bytes} | ${crc.toFixed(0)} | ${(crc / bytes).toFixed(2)} | ${sha.toFixed(0)} |`);
}
