/**
 * The generator-to-stream adapter (src/server/server-stream.ts) over a fake call (a context and a push sink, rpc/handler-table.ts):
 * backpressure (the generator is not pulled while the stream waits for drain), cancellation (the
 * generator is returned, nothing more is written, no status is sent), deadline (DEADLINE_EXCEEDED)
 * and errors (the mapped status).
 */
import { EventEmitter, once } from 'node:events';
import { status as Code, type ServiceError } from '@grpc/grpc-js';
import { ANONYMOUS } from '../../src/app/session-service.js';
import { toServiceError } from '../../src/server/status-map.js';
import { describe, expect, it } from 'vitest';
import { pipeStream } from '../../src/server/server-stream.js';

class FakeCall extends EventEmitter {
  readonly written: number[] = [];
  ended = false;
  cancelled = false;
  /** write() returns false once this many messages are buffered. */
  highWater = 2;
  deadline: number = Infinity;

  write(m: number): boolean {
    this.written.push(m);
    return this.written.length % this.highWater !== 0;
  }
  readonly caller = ANONYMOUS;
  readonly credential = '';
  onDrain(fn: () => void): void {
    this.once('drain', fn);
  }
  onCancel(fn: () => void): void {
    this.once('cancelled', fn);
  }
  end(err?: unknown): void {
    // As the transports' sinks do: an error goes out as its mapped status.
    if (err !== undefined) this.emit('error', toServiceError(err, () => undefined));
    else this.ended = true;
  }
  cancel(): void {
    this.cancelled = true;
    this.emit('cancelled');
  }
}

const tick = () => new Promise((r) => setImmediate(r));

describe('pipeStream', () => {
  it('pulls the generator only while the stream is writable, then ends OK', async () => {
    const call = new FakeCall();
    let pulled = 0;
    pipeStream(call, call, async function* () {
      for (let i = 0; i < 5; i++) {
        pulled++;
        yield i;
      }
    });
    for (let i = 0; i < 5; i++) await tick();
    // Two written, the second refused: nothing more is pulled until drain.
    expect(call.written).toEqual([0, 1]);
    expect(pulled).toBe(2);
    call.emit('drain');
    for (let i = 0; i < 5; i++) await tick();
    expect(call.written).toEqual([0, 1, 2, 3]);
    call.emit('drain');
    for (let i = 0; i < 5; i++) await tick();
    expect(call.written).toEqual([0, 1, 2, 3, 4]);
    expect(call.ended).toBe(true);
  });

  it('a cancelled call returns the generator (finally runs), writes nothing more and sends no status', async () => {
    const call = new FakeCall();
    call.highWater = 1_000;
    let cleaned = false;
    let release: () => void = () => undefined;
    const stream = pipeStream(call, call, async function* () {
      try {
        yield 1;
        await new Promise<void>((r) => { release = r; });
        yield 2;
      } finally {
        cleaned = true;
      }
    });
    let hook = false;
    stream.onEnd(() => { hook = true; });
    await tick();
    expect(call.written).toEqual([1]);
    call.cancel();
    expect(hook).toBe(true);
    release();
    for (let i = 0; i < 5; i++) await tick();
    expect(cleaned).toBe(true);
    expect(call.written).toEqual([1]);
    expect(call.ended).toBe(false);
    expect(call.listenerCount('error')).toBe(0);
  });

  it('a deadline further away than setTimeout can wait (~24.8 days) does not end the stream at once', async () => {
    const call = new FakeCall();
    call.deadline = Date.now() + 365 * 86_400_000;
    let errors = 0;
    call.on('error', () => errors++);
    const stream = pipeStream(call, call, async function* () {
      yield 1;
      await new Promise(() => undefined);
    });
    await new Promise((r) => setTimeout(r, 50));
    expect(errors).toBe(0);
    expect(stream.ended).toBe(false);
    expect(call.written).toEqual([1]);
    call.cancel();
  });

  it('ends with DEADLINE_EXCEEDED at the call deadline, and with the mapped status on a throw', async () => {
    const call = new FakeCall();
    call.deadline = Date.now() + 30;
    const errored = once(call, 'error');
    pipeStream(call, call, async function* () {
      yield 1;
      await new Promise(() => undefined); // never resolves: only the deadline ends this stream
    });
    const [err] = (await errored) as [ServiceError];
    expect(err.code).toBe(Code.DEADLINE_EXCEEDED);

    const failing = new FakeCall();
    const failed = once(failing, 'error');
    pipeStream(failing, failing, async function* () {
      yield 1;
      throw new Error('boom');
    });
    const [e2] = (await failed) as [ServiceError];
    expect(e2).toMatchObject({ code: Code.INTERNAL });
    expect(failing.written).toEqual([1]);
  });
});
