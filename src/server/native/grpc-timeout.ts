/**
 * The `grpc-timeout` request header (gRPC over HTTP/2: `TimeoutValue TimeoutUnit`, at most 8
 * digits, units H M S m u n) as milliseconds.
 */

const UNIT_MS: Readonly<Record<string, number>> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000_001 };

const TIMEOUT = /^\s*(\d{1,8})\s*([HMSmun])\s*$/;

/** The timeout in milliseconds (fractions for u and n), or undefined when the value is not a valid grpc-timeout. */
export function parseGrpcTimeout(value: string): number | undefined {
  const m = TIMEOUT.exec(value);
  if (m === null) return undefined;
  return Number(m[1]) * (UNIT_MS[m[2] as string] as number);
}
