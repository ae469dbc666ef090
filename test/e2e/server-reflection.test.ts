/**
 * Server reflection (grpc.reflection.v1 / v1alpha) against a real server: `buf curl` discovers the
 * schema by reflection and calls SessionService and Health with JSON; the raw reflection stream
 * answers list_services, file_by_filename and file_containing_symbol (services, methods, messages,
 * enums, nested types) with transitive dependencies, and NOT_FOUND for unknown names.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentials, status } from '@grpc/grpc-js';
import { BinaryReader, WireType } from '@bufbuild/protobuf/wire';
import { ServerReflectionClient, type ServerReflectionRequest, type ServerReflectionResponse } from '../../gen/grpc/reflection/v1/reflection.js';
import { ServerReflectionClient as AlphaClient } from '../../gen/grpc/reflection/v1alpha/reflection.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { ROOT } from '../support/server-process.js';
import { api } from '../support/e2e.js';

const run = promisify(execFile);
const BUF = join(ROOT, 'node_modules/.bin/buf');
let t: TestServer;
beforeAll(async () => { t = await startTestServer(); });
afterAll(async () => { await t.stop(); });

async function bufCurl(...args: string[]): Promise<string> {
  const { stdout } = await run(BUF, ['curl', '--protocol', 'grpc', '--http2-prior-knowledge', ...args], { timeout: 20_000 });
  return stdout;
}

/** Sends requests on one reflection stream; resolves with the responses in order. */
function reflect(requests: Partial<ServerReflectionRequest>[], alpha = false): Promise<ServerReflectionResponse[]> {
  const Ctor = alpha ? AlphaClient : ServerReflectionClient;
  const client = new Ctor(t.server.address, credentials.createInsecure());
  return new Promise((resolve, reject) => {
    const out: ServerReflectionResponse[] = [];
    const stream = client.serverReflectionInfo();
    stream.on('data', (r: ServerReflectionResponse) => out.push(r));
    stream.on('error', reject);
    stream.on('end', () => {
      client.close();
      resolve(out);
    });
    for (const r of requests) stream.write({ host: '', messageRequest: undefined, ...r });
    stream.end();
  });
}

/** The `name` (field 1) and `dependency` (field 3) of serialized FileDescriptorProtos. */
function fileNames(r: ServerReflectionResponse): { name: string; deps: string[] }[] {
  const m = r.messageResponse;
  if (m?.$case !== 'fileDescriptorResponse') throw new Error(`expected files, got ${m?.$case}: ${JSON.stringify(m?.value)}`);
  return m.value.fileDescriptorProto.map((bytes) => {
    const rd = new BinaryReader(bytes);
    let name = '';
    const deps: string[] = [];
    while (rd.pos < rd.len) {
      const [f, w] = rd.tag();
      if (f === 1 && w === WireType.LengthDelimited) name = rd.string();
      else if (f === 3 && w === WireType.LengthDelimited) deps.push(rd.string());
      else rd.skip(w, f);
    }
    return { name, deps };
  });
}

describe('server reflection', () => {
  it('buf curl calls CreateSession and GetSession by reflection, with JSON', async () => {
    const url = `http://${t.server.address}`;
    const created = JSON.parse(await bufCurl(`${url}/palimpsest.v1.SessionService/CreateSession`, '-d', '{"sessionId":"via-buf","labels":{"tool":"buf"},"cwd":"/w"}'));
    expect(created.session).toMatchObject({ id: 'via-buf', labels: { tool: 'buf' }, cwd: '/w' });
    await api(t.client).appendEvents({ sessionId: 'via-buf', events: [{ type: 'x/y', data: { kind: { $case: 'json', value: '{"a":1}' } } }] });
    const got = JSON.parse(await bufCurl(`${url}/palimpsest.v1.SessionService/GetSession`, '-d', '{"sessionId":"via-buf"}'));
    expect(got.session).toMatchObject({ id: 'via-buf', eventCount: '1', headSeq: '0' });
    const events = JSON.parse(await bufCurl(`${url}/palimpsest.v1.SessionService/ListEvents`, '-d', '{"sessionId":"via-buf"}'));
    expect(events.events[0]).toMatchObject({ type: 'x/y', data: { json: '{"a":1}' } });
    // Errors come back with their code.
    const failed = await bufCurl(`${url}/palimpsest.v1.SessionService/GetSession`, '-d', '{"sessionId":"nope"}').then(() => 'ok', (e: { stderr: string }) => e.stderr);
    expect(failed).toMatch(/not_found|NotFound/i);
  });

  it('buf curl: health check, list services, list methods', async () => {
    const url = `http://${t.server.address}`;
    expect(JSON.parse(await bufCurl(`${url}/grpc.health.v1.Health/Check`, '-d', '{}'))).toEqual({ status: 'SERVING' });
    const services = (await bufCurl('--list-services', url)).trim().split('\n').sort();
    expect(services).toEqual(['grpc.health.v1.Health', 'grpc.reflection.v1.ServerReflection', 'grpc.reflection.v1alpha.ServerReflection', 'palimpsest.v1.SessionService']);
    const methods = (await bufCurl('--list-methods', `${url}`)).trim().split('\n');
    expect(methods).toContain('palimpsest.v1.SessionService/AppendEvents');
    expect(methods).toContain('grpc.health.v1.Health/Watch');
  });

  it.each([false, true])('raw stream (v1alpha=%s): list, by file name, by symbol, transitive dependencies, not found', async (alpha) => {
    const [list, byFile, bySvc, byMethod, byNested, byEnum, byNestedEnum, missingFile, missingSym, unset] = await reflect([
      { messageRequest: { $case: 'listServices', value: '' } },
      { messageRequest: { $case: 'fileByFilename', value: 'palimpsest/v1/service.proto' } },
      { messageRequest: { $case: 'fileContainingSymbol', value: 'palimpsest.v1.SessionService' } },
      { messageRequest: { $case: 'fileContainingSymbol', value: 'palimpsest.v1.SessionService.AppendEvents' } },
      { messageRequest: { $case: 'fileContainingSymbol', value: 'google.rpc.BadRequest.FieldViolation' } },
      { messageRequest: { $case: 'fileContainingSymbol', value: 'palimpsest.v1.Direction' } },
      { messageRequest: { $case: 'fileContainingSymbol', value: 'grpc.health.v1.HealthCheckResponse.ServingStatus' } },
      { messageRequest: { $case: 'fileByFilename', value: 'nope.proto' } },
      { messageRequest: { $case: 'fileContainingSymbol', value: 'palimpsest.v1.Nope' } },
      { host: 'h' },
    ], alpha);
    expect(list?.messageResponse?.$case === 'listServicesResponse' && list.messageResponse.value.service.map((s) => s.name).sort()).toContain('palimpsest.v1.SessionService');
    const files = fileNames(byFile!);
    expect(files[0]?.name).toBe('palimpsest/v1/service.proto');
    // Transitive closure: every dependency of every returned file is returned too.
    const names = new Set(files.map((f) => f.name));
    expect(names).toEqual(new Set(['palimpsest/v1/service.proto', 'palimpsest/v1/content.proto', 'palimpsest/v1/event.proto', 'palimpsest/v1/session.proto', 'google/protobuf/any.proto']));
    for (const f of files) for (const d of f.deps) expect(names.has(d)).toBe(true);
    expect(fileNames(bySvc!).map((f) => f.name)).toEqual(files.map((f) => f.name));
    expect(fileNames(byMethod!)[0]?.name).toBe('palimpsest/v1/service.proto');
    const rpc = fileNames(byNested!).map((f) => f.name);
    expect(rpc[0]).toBe('google/rpc/error_details.proto');
    expect(rpc).toContain('google/protobuf/duration.proto');
    expect(fileNames(byEnum!)[0]?.name).toBe('palimpsest/v1/service.proto');
    expect(fileNames(byNestedEnum!)[0]?.name).toBe('grpc/health/v1/health.proto');
    for (const r of [missingFile, missingSym]) {
      expect(r?.messageResponse?.$case).toBe('errorResponse');
      expect(r?.messageResponse?.$case === 'errorResponse' && r.messageResponse.value.errorCode).toBe(status.NOT_FOUND);
    }
    expect(unset?.messageResponse?.$case).toBe('errorResponse');
    expect(unset?.validHost).toBe('h');
    expect(missingSym?.originalRequest?.messageRequest).toEqual({ $case: 'fileContainingSymbol', value: 'palimpsest.v1.Nope' });
  });
});
