/**
 * Handlers may answer with a response already encoded (a Buffer: the model-history entries cached
 * per message, a ListEvents page encoded from the stored texts, a subscription delta encoded once
 * for every subscriber of a session). This copy of a service definition has response serializers
 * that pass such a Buffer through and encode anything else as the generated code does; both ports
 * serialize through it (grpc-js here, the Connect adapter's responseBytes).
 */
export function passThroughResponses<D extends object>(def: D): D {
  const out: Record<string, unknown> = {};
  for (const [name, m] of Object.entries(def) as [string, { responseSerialize: (v: unknown) => Buffer }][]) {
    const encode = m.responseSerialize;
    out[name] = { ...m, responseSerialize: (v: unknown): Buffer => (Buffer.isBuffer(v) ? v : encode(v)) };
  }
  return out as D;
}
