/**
 * The PostgreSQL store's event columns as binary arrays (src/store/postgres/binary-arrays.ts):
 * the bytes of PostgreSQL's array_send format, which array_recv reads (a round trip through a
 * real server: test/integration/postgres-group-commit.test.ts and the store contract).
 */
import { describe, expect, it } from 'vitest';
import { boolArrayParam, eventArrayParams, int8ArrayParam, textArrayParam } from '../../src/store/postgres/binary-arrays.js';

const int32 = (...xs: number[]): number[] => xs.flatMap((x) => { const b = Buffer.alloc(4); b.writeInt32BE(x); return [...b]; });
const int64 = (x: bigint): number[] => { const b = Buffer.alloc(8); b.writeBigInt64BE(x); return [...b]; };

describe('PostgreSQL binary array parameters', () => {
  it('writes bigint arrays exactly, past 2^53 and below zero', () => {
    const xs = [0, 1, -1, 2 ** 53 - 1, 2 ** 53 + 2 ** 40 * 7, -(2 ** 62)];
    expect([...int8ArrayParam(xs)]).toEqual([
      ...int32(1, 0, 20, xs.length, 1),
      ...xs.flatMap((x) => [...int32(8), ...int64(BigInt(x))]),
    ]);
  });

  it('refuses what is not a bigint (as PostgreSQL refused its text)', () => {
    for (const bad of [1.5, NaN, Infinity, 2 ** 63]) expect(() => int8ArrayParam([bad])).toThrow(/not a bigint/);
  });

  it('writes text arrays as UTF-8 without escaping, NULL elements as length -1', () => {
    expect([...textArrayParam(['é"\\', null, ''])!]).toEqual([
      ...int32(1, 1, 25, 3, 1),
      ...int32(4), ...Buffer.from('é"\\'), ...int32(-1), ...int32(0),
    ]);
  });

  it('sends a column of NULLs as a NULL parameter, an empty column as an empty array', () => {
    expect(textArrayParam([null, null])).toBeNull();
    expect(boolArrayParam([null])).toBeNull();
    expect([...textArrayParam([])!]).toEqual(int32(0, 0, 25));
    expect([...int8ArrayParam([])]).toEqual(int32(0, 0, 20));
    expect([...boolArrayParam([])!]).toEqual(int32(0, 0, 16));
  });

  it('writes boolean arrays with their NULLs', () => {
    expect([...boolArrayParam([true, null, false])!]).toEqual([...int32(1, 1, 16, 3, 1), ...int32(1), 1, ...int32(-1), ...int32(1), 0]);
  });

  it('maps the seven event columns to their parameter types', () => {
    const p = eventArrayParams([[5], ['t'], [7], ['{}'], [null], [null], [null]]);
    expect(p.map((b) => (b === null ? null : b.readInt32BE(8)))).toEqual([20, 25, 20, 25, null, null, null]);
  });
});
