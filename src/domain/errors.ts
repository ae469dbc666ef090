/**
 * Typed domain errors. The domain never knows gRPC codes: it throws/returns a stable `reason`
 * (the rule IDs of dsh-semantics 0.2, or Palimpsest's own documented reasons) plus structured
 * metadata; src/server maps reasons to status codes in one table.
 */
export class DomainError extends Error {
  /** Stable machine-readable reason, e.g. `REPLACE_START_NOT_ON_SURFACE`. */
  readonly reason: string;
  /** Structured details (string values only, as google.rpc.ErrorInfo.metadata requires). */
  readonly metadata: Readonly<Record<string, string>>;
  /** Index of the failing event in its batch, when the error concerns one event of a batch. */
  readonly index: number | undefined;

  constructor(reason: string, message: string, metadata: Record<string, string> = {}, index?: number) {
    super(message);
    this.name = 'DomainError';
    this.reason = reason;
    this.index = index;
    this.metadata = index === undefined ? { ...metadata } : { ...metadata, index: String(index) };
  }

  /** The same error attributed to position `index` of a batch. */
  atIndex(index: number): DomainError {
    return new DomainError(this.reason, `event ${index} of the batch: ${this.message}`, { ...this.metadata }, index);
  }
}
