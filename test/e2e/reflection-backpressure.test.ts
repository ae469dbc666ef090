/**
 * Issue #33 item 7: a server-reflection stream whose client gives it a zero window must not keep
 * producing answers. ServerReflectionInfo answers one response per request; a client that sends
 * requests and never lets the answers through (HTTP/2 initial window 0: the server may send no
 * DATA on the stream) would otherwise have every answer built and queued in the server's memory,
 * as many as it cares to ask for. The handler writes only while the client reads
 * (src/server/reflection.ts), and a bidi call is paused while a request waits to be taken, so the
 * server stops reading the requests too: the client can push only about a flow-control window of
 * requests, the rest wait in the client. Meanwhile other clients are served. On both ports (the
 * gRPC port, and the web port's gRPC protocol), which serve the same handler table.
 *
 * Measured through a byte-counting TCP proxy: 4 MB of requests offered (4,000 requests of 1 KB,
 * each answer echoing its request); with the fix the server took 131,251 bytes of them on either
 * port before the stream stalled; with the fix reverted (every answer written at once, without
 * waiting for the stream to drain) it took all 4,047,052 bytes, so built and held all 4,000
 * answers, and this test fails.
 */
import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import { ServerReflectionRequest, ServerReflectionResponse } from '../../gen/grpc/reflection/v1/reflection.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { CountingProxy, grpcFrame, grpcMessages, RawGrpc } from '../support/raw-grpc.js';
import { waitFor } from '../support/poll.js';

const PATH = '/grpc.reflection.v1.ServerReflection/ServerReflectionInfo';
/** Requests offered on the stalled stream, and the bytes of each (a padded `host`, echoed twice in its answer). */
const REQUESTS = 4000;
const HOST = 'h'.repeat(1000);

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ webListen: '127.0.0.1:0' });
});
afterAll(async () => {
  await t?.stop();
});

const listServices = (host: string): Buffer => grpcFrame(ServerReflectionRequest.encode(ServerReflectionRequest.fromPartial({ host, messageRequest: { $case: 'listServices', value: '*' } })).finish());

/** Waits until `value()` has not changed for 300 ms; returns it. */
async function settled(value: () => number, what: string): Promise<number> {
  let last = -1;
  let stillSince = Date.now();
  await waitFor(() => {
    const v = value();
    if (v !== last) {
      last = v;
      stillSince = Date.now();
    }
    return Date.now() - stillSince >= 300;
  }, 20_000, what, 50);
  return last;
}

const PORTS = [
  { name: 'gRPC port (@grpc/grpc-js)', address: () => t.server.address },
  { name: 'web port, gRPC protocol (connect-node)', address: () => `127.0.0.1:${t.server.webPort!}` },
] as const;

describe.each(PORTS)('$name', (port) => {
  it('a reflection stream given a zero window stops taking requests (no answers pile up) while another client is served', async () => {
    const proxy = await CountingProxy.start(port.address());
    // Initial window 0: the server may send this stream's headers but not one byte of its answers.
    const stalled = await RawGrpc.connect(`http://${proxy.address}`, { settings: { initialWindowSize: 0 } });
    const other = await RawGrpc.connect(`http://${port.address()}`);
    try {
      const body = Buffer.concat(Array.from({ length: REQUESTS }, () => listServices(HOST)));
      expect(body.length).toBeGreaterThan(4_000_000);
      const before = proxy.toServer;
      const call = stalled.start(PATH, { body, chunkSize: 16 * 1024, keepOpen: true });
      const taken = (await settled(() => proxy.toServer, 'the stalled reflection stream to stop taking requests')) - before;
      // About a flow-control window of requests, far from the 4 MB offered: the server stopped
      // reading (and answering) once its first answers could not be sent.
      expect(taken).toBeLessThan(512 * 1024);
      expect(proxy.toClient).toBeLessThan(16 * 1024);
      expect(call.received()).toBe(0);

      // Another client, on its own connection, is served meanwhile.
      const r = await other.call(PATH, { body: listServices('other') });
      expect(r.code, r.message).toBe(status.OK);
      const answer = ServerReflectionResponse.decode(grpcMessages(r.data)[0]!.body);
      expect(answer.messageResponse?.$case).toBe('listServicesResponse');

      // The stalled client gives up: its stream is reset, nothing is left running for it.
      call.stream.close(http2.constants.NGHTTP2_CANCEL);
      await new Promise<void>((resolve) => (call.stream.closed ? resolve() : call.stream.once('close', () => resolve())));
    } finally {
      stalled.close();
      other.close();
      await proxy.close();
    }
  });
});
