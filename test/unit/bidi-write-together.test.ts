/**
 * writeTogether (src/server/grpc/handle-bidi.ts): the answers buffered behind one being sent on a
 * grpc-js duplex call are handed to its intercepting call at once, in order, and the Writable's
 * flow control ('drain') still waits until every one of them is written.
 */
import { Duplex } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { ServerDuplexStream } from '@grpc/grpc-js';
import { writeTogether } from '../../src/server/grpc/handle-bidi.js';
import { GrpcSink } from '../../src/server/grpc/handle-server-stream.js';

/** A duplex shaped like grpc-js's ServerDuplexStreamImpl: `_write` sends one message through `call` and completes when it is written. */
function fakeCall(): { duplex: Duplex; sent: unknown[]; complete: () => number } {
  const sent: unknown[] = [];
  const owed: (() => void)[] = [];
  const call = {
    sendMessage(message: unknown, callback: () => void): void {
      sent.push(message);
      owed.push(callback);
    },
  };
  const duplex = new Duplex({ objectMode: true, highWaterMark: 2, read() {} });
  duplex._write = (chunk: unknown, _enc, cb) => call.sendMessage(chunk, cb);
  (duplex as unknown as { call: typeof call }).call = call;
  /** Completes every write the transport holds; answers how many. */
  const complete = (): number => {
    const now = owed.splice(0);
    for (const cb of now) cb();
    return now.length;
  };
  return { duplex, sent, complete };
}

describe('writeTogether', () => {
  it('without it, a grpc-js duplex call sends one buffered answer per completed write', () => {
    const { duplex, sent, complete } = fakeCall();
    for (let i = 0; i < 5; i++) duplex.write(i);
    expect(sent).toEqual([0]);
    complete();
    expect(sent).toEqual([0, 1]);
  });

  it('with it, every answer buffered behind the one in flight is sent at once, in order; drain waits for all', async () => {
    const { duplex, sent, complete } = fakeCall();
    writeTogether(duplex as unknown as ServerDuplexStream<unknown, unknown>);
    let drained = false;
    const writes = Array.from({ length: 5 }, (_, i) => duplex.write(i));
    // Past the high-water mark (2): the sink's flow control sees false.
    expect(writes).toEqual([true, false, false, false, false]);
    duplex.once('drain', () => {
      drained = true;
    });
    expect(sent).toEqual([0]);
    expect(complete()).toBe(1);
    // The four buffered ones together, before any of them completed.
    expect(sent).toEqual([0, 1, 2, 3, 4]);
    await new Promise((r) => setImmediate(r));
    expect(drained).toBe(false);
    expect(complete()).toBe(4);
    await new Promise((r) => setImmediate(r));
    expect(drained).toBe(true);
  });

  it('a coalescing sink sends the answers written in one turn together at its end, the first included', async () => {
    const { duplex, sent, complete } = fakeCall();
    const sink = new GrpcSink(duplex as never, (e) => e as never, writeTogether(duplex as unknown as ServerDuplexStream<unknown, unknown>));
    // Written from promise jobs of one turn, as AppendStream's answers are.
    await Promise.resolve().then(() => sink.write(0)).then(() => sink.write(1)).then(() => sink.write(2));
    expect(sent).toEqual([]);
    await new Promise((r) => process.nextTick(r));
    expect(sent).toEqual([0, 1, 2]);
    expect(complete()).toBe(3);
    // A later turn starts a new run.
    sink.write(3);
    await new Promise((r) => setImmediate(r));
    expect(sent).toEqual([0, 1, 2, 3]);
  });

  it('leaves a call that does not look like grpc-js\'s alone', () => {
    const duplex = new Duplex({ objectMode: true, read() {}, write(_c, _e, cb) { cb(); } });
    writeTogether(duplex as unknown as ServerDuplexStream<unknown, unknown>);
    expect(typeof (duplex as unknown as { _writev: unknown })._writev).not.toBe('function');
  });
});
