/**
 * The gRPC port's single interceptor (src/server/grpc/admission-call.ts), driven by a scripted
 * grpc-js base call: telemetry around admission in one object. The e2e files (security,
 * server-telemetry, framing, transport-conformance) cover it through a real server; these pin the
 * order of its steps: what reaches the handler, what telemetry records (once), and that the
 * per-connection slot is given back on every ending.
 */
import { describe, expect, it } from 'vitest';
import { Metadata, status as Code, type ServerInterceptingCallInterface } from '@grpc/grpc-js';
import { makeServerInterceptor } from '../../src/server/grpc/admission-call.js';
import { hashToken, StreamLimiter, TENANT_KEY, TokenRegistry } from '../../src/server/auth.js';
import { MalformedRequest } from '../../src/server/safe-decode.js';
import type { HeaderCarrier, RpcInfo, RpcRecord, RpcTelemetry } from '../../src/server/rpc-telemetry.js';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

type Listener = Parameters<ServerInterceptingCallInterface['start']>[0];

/** A base call: records what the interceptor sends down, lets the test push inbound events. */
function baseCall(metadata: Metadata) {
  const sent: string[] = [];
  let up: Listener | undefined;
  const call = {
    start: (l: Listener) => {
      up = l;
      l.onReceiveMetadata(metadata);
    },
    sendMetadata: () => sent.push('metadata'),
    sendMessage: (_m: unknown, cb: () => void) => {
      sent.push('message');
      cb();
    },
    sendStatus: (st: { code: number; details: string }) => sent.push(`status ${Code[st.code]}: ${st.details}`),
    startRead: () => undefined,
    getPeer: () => '127.0.0.1:1',
    getDeadline: () => Infinity,
    getHost: () => 'localhost',
    getAuthContext: () => ({}),
    getConnectionInfo: () => ({ remoteAddress: '127.0.0.1', remotePort: 1 }),
    getMetricsRecorder: () => undefined,
    decoder: { readState: 0 },
  };
  return { call: call as unknown as ServerInterceptingCallInterface & { decoder: { readState: number } }, sent, up: () => up! };
}

/** A telemetry that records each call's steps. */
function recordingTelemetry() {
  const log: string[] = [];
  const telemetry: RpcTelemetry = {
    start: (info: RpcInfo): RpcRecord => {
      // The caller's headers are read at the end, as the real record does (after admission set the tenant).
      let caller: HeaderCarrier | undefined;
      return {
        begin: () => log.push(`begin ${info.method}`),
        caller: (h) => {
          caller = h;
          log.push('caller');
        },
        request: () => log.push('request'),
        run: (fn) => fn(),
        finish: (code, message) => log.push(`finish ${Code[code]}${message ? `: ${message.slice(0, 30)}` : ''} tenant=${String(caller?.get(TENANT_KEY) ?? '')}`),
      };
    },
  };
  return { telemetry, log };
}

/** A handler-side listener recording what reaches it. */
function handler() {
  const got: string[] = [];
  const listener: Listener = {
    onReceiveMetadata: () => got.push('metadata'),
    onReceiveMessage: () => got.push('message'),
    onReceiveHalfClose: () => got.push('halfClose'),
    onCancel: () => got.push('cancel'),
  };
  return { listener, got };
}

const method = (name: string) => ({ path: `/palimpsest.v1.SessionService/${name}`, requestStream: false, responseStream: false }) as never;

function registryFile(): TokenRegistry {
  const dir = mkdtempSync(join(tmpdir(), 'admission-'));
  const file = join(dir, 'tokens.json');
  writeFileSync(file, JSON.stringify({ tokens: [{ name: 'w', sha256: hashToken('tok'), tenant: 'acme', permissions: ['append'] }] }));
  return new TokenRegistry(file);
}

/** One AppendEvents call through the interceptor (tokens from `registry`), started with a recording handler. */
function startCall(md: Metadata, registry?: TokenRegistry) {
  const { telemetry, log } = recordingTelemetry();
  const limiter = new StreamLimiter(4);
  const base = baseCall(md);
  const call = makeServerInterceptor(telemetry, registry, limiter)(method('AppendEvents'), base.call);
  const h = handler();
  call.start(h.listener as never);
  return { log, limiter, base, call, h };
}

describe('the gRPC port interceptor (telemetry around admission)', () => {
  it('admits a call: every event reaches the handler in order, the tenant is set, the status is recorded once and the slot given back', () => {
    const md = new Metadata();
    md.set('authorization', 'Bearer tok');
    md.set('x-palimpsest-tenant', 'forged');
    const { log, limiter, base, call, h } = startCall(md, registryFile());
    expect(md.get(TENANT_KEY)).toEqual(['acme']);
    expect(limiter.active('127.0.0.1:1')).toBe(1);
    base.up().onReceiveMessage({ sessionId: 's' });
    base.up().onReceiveHalfClose();
    call.sendMessage({}, () => call.sendStatus({ code: Code.OK, details: 'OK' }));
    expect(h.got).toEqual(['metadata', 'message', 'halfClose']);
    expect(base.sent).toEqual(['message', 'status OK: OK']);
    expect(log).toEqual(['caller', 'begin AppendEvents', 'request', 'finish OK: OK tenant=acme']);
    expect(limiter.active('127.0.0.1:1')).toBe(0);
  });

  it('refuses a call without a valid token before the handler sees it; the refusal is recorded and nothing is held', () => {
    const md = new Metadata();
    md.set('authorization', 'Bearer wrong');
    const { log, limiter, base, h } = startCall(md, registryFile());
    base.up().onReceiveMessage({ sessionId: 's' });
    base.up().onReceiveHalfClose();
    expect(h.got).toEqual([]);
    expect(base.sent).toHaveLength(1);
    expect(base.sent[0]).toMatch(/^status UNAUTHENTICATED: /);
    expect(log.filter((l) => l.startsWith('finish'))).toEqual([expect.stringMatching(/^finish UNAUTHENTICATED/)]);
    expect(limiter.active('127.0.0.1:1')).toBe(0);
  });

  it('refuses request bytes that did not decode and a request stream cut inside a frame (INVALID_ARGUMENT), giving the slot back', () => {
    for (const step of ['message', 'halfClose'] as const) {
      const { log, limiter, base, h } = startCall(new Metadata());
      if (step === 'message') base.up().onReceiveMessage(new MalformedRequest('/palimpsest.v1.SessionService/AppendEvents', 'bad wire type'));
      else {
        base.up().onReceiveMessage({ sessionId: 's' });
        base.call.decoder.readState = 1;
        base.up().onReceiveHalfClose();
      }
      expect(h.got).toEqual(step === 'message' ? ['metadata'] : ['metadata', 'message']);
      expect(base.sent).toEqual([expect.stringMatching(/^status INVALID_ARGUMENT: /)]);
      expect(log.filter((l) => l.startsWith('finish'))).toEqual([expect.stringMatching(/^finish INVALID_ARGUMENT/)]);
      expect(limiter.active('127.0.0.1:1')).toBe(0);
    }
  });

  it('a cancel is recorded once as CANCELLED, reaches the handler and gives the slot back; later events are dropped', () => {
    const { log, limiter, base, h } = startCall(new Metadata());
    base.up().onCancel();
    base.up().onCancel();
    base.up().onReceiveMessage({ sessionId: 's' });
    expect(h.got).toEqual(['metadata', 'cancel']);
    expect(log.filter((l) => l.startsWith('finish'))).toEqual(['finish CANCELLED: cancelled by the client tenant=']);
    expect(limiter.active('127.0.0.1:1')).toBe(0);
  });
});
