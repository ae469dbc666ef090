/**
 * gRPC server reflection (grpc.reflection.v1 and v1alpha ServerReflectionInfo), so that generic
 * clients (`buf curl`, grpcurl, Postman) can call the server without local protos.
 *
 * The schema comes from gen/descriptor.binpb, a FileDescriptorSet of the whole proto module with
 * its imports (`buf build --as-file-descriptor-set`, written by scripts/gen.sh), so it can never
 * drift from the generated code. The set is indexed minimally (file names, dependencies, and the
 * fully qualified names of services, methods, messages and enums, nested included); files are
 * served as the exact bytes found in the set, each with its transitive dependencies.
 *
 * Not `@grpc/reflection` (1.0.4, the latest, checked 2026-12-04 against this module): its
 * descriptors are rebuilt by protobufjs, which names every map entry `<Field>` instead of
 * `<Field>Entry` (fullstorydev/grpcurl#519, "incorrect implicit map entry name": all six map
 * fields here), merges the files of a package into one invented file with no dependencies
 * (grpc/grpc-node#3018), camelCases field names by default and drops proto3 `optional`; `buf curl`
 * could neither list nor call SessionService through it. The map-entry code is unchanged in
 * protobufjs 8.8.1. Re-check when protobufjs's descriptor extension emits `FieldNameEntry`.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { status as Code } from '@grpc/grpc-js';
import { bidi, type HandlerTable } from './rpc/handler-table.js';
import { BinaryReader, WireType } from '@bufbuild/protobuf/wire';
import {
  ServerReflectionService as ReflectionV1Service,
  type ServerReflectionRequest,
  type ServerReflectionResponse,
} from '../../gen/grpc/reflection/v1/reflection.js';
import { ServerReflectionService as ReflectionV1AlphaService } from '../../gen/grpc/reflection/v1alpha/reflection.js';

export { ReflectionV1Service, ReflectionV1AlphaService };

/** One file of the set. */
interface FileEntry {
  readonly name: string;
  readonly bytes: Uint8Array;
  readonly dependencies: readonly string[];
}

/** An index over a FileDescriptorSet. */
export class DescriptorIndex {
  readonly #files = new Map<string, FileEntry>();
  /** Fully qualified symbol -> file name. */
  readonly #symbols = new Map<string, string>();
  /** Fully qualified message names (for all_extension_numbers_of_type). */
  readonly #messages = new Set<string>();
  readonly #services: string[] = [];

  /** Indexes the bytes of a google.protobuf.FileDescriptorSet. */
  constructor(set: Uint8Array) {
    const r = new BinaryReader(set);
    while (r.pos < r.len) {
      const [field, wire] = r.tag();
      if (field === 1 && wire === WireType.LengthDelimited) this.#addFile(r.bytes());
      else r.skip(wire, field);
    }
  }

  /** Full names of the services in the set. */
  get services(): readonly string[] {
    return this.#services;
  }

  /** The file named `name` followed by its transitive dependencies (each once), or undefined. */
  fileWithDependencies(name: string): Uint8Array[] | undefined {
    if (!this.#files.has(name)) return undefined;
    const out: Uint8Array[] = [];
    const seen = new Set<string>();
    const visit = (n: string): void => {
      if (seen.has(n)) return;
      seen.add(n);
      const f = this.#files.get(n);
      if (!f) return;
      out.push(f.bytes);
      for (const d of f.dependencies) visit(d);
    };
    visit(name);
    return out;
  }

  /** The file declaring a fully qualified symbol (leading dot allowed). */
  fileOfSymbol(symbol: string): string | undefined {
    return this.#symbols.get(symbol.startsWith('.') ? symbol.slice(1) : symbol);
  }

  /** Whether a fully qualified message type is known. */
  hasMessage(name: string): boolean {
    return this.#messages.has(name.startsWith('.') ? name.slice(1) : name);
  }

  #addFile(bytes: Uint8Array): void {
    const r = new BinaryReader(bytes);
    let name = '';
    let pkg = '';
    const dependencies: string[] = [];
    const messages: Uint8Array[] = [];
    const enums: Uint8Array[] = [];
    const services: Uint8Array[] = [];
    while (r.pos < r.len) {
      const [field, wire] = r.tag();
      if (wire !== WireType.LengthDelimited) {
        r.skip(wire, field);
        continue;
      }
      switch (field) {
        case 1: name = r.string(); break;
        case 2: pkg = r.string(); break;
        case 3: dependencies.push(r.string()); break;
        case 4: messages.push(r.bytes()); break;
        case 5: enums.push(r.bytes()); break;
        case 6: services.push(r.bytes()); break;
        default: r.skip(wire, field);
      }
    }
    this.#files.set(name, { name, bytes, dependencies });
    const scope = pkg === '' ? '' : `${pkg}.`;
    for (const m of messages) this.#addMessage(m, scope, name);
    for (const e of enums) this.#symbols.set(scope + nameOf(e), name);
    for (const s of services) {
      const sr = new BinaryReader(s);
      let serviceName = '';
      const methods: string[] = [];
      while (sr.pos < sr.len) {
        const [field, wire] = sr.tag();
        if (field === 1 && wire === WireType.LengthDelimited) serviceName = sr.string();
        else if (field === 2 && wire === WireType.LengthDelimited) methods.push(nameOf(sr.bytes()));
        else sr.skip(wire, field);
      }
      const full = scope + serviceName;
      this.#services.push(full);
      this.#symbols.set(full, name);
      for (const m of methods) this.#symbols.set(`${full}.${m}`, name);
    }
  }

  #addMessage(bytes: Uint8Array, scope: string, file: string): void {
    const r = new BinaryReader(bytes);
    let messageName = '';
    const nested: Uint8Array[] = [];
    const enums: Uint8Array[] = [];
    while (r.pos < r.len) {
      const [field, wire] = r.tag();
      if (wire !== WireType.LengthDelimited) r.skip(wire, field);
      else if (field === 1) messageName = r.string();
      else if (field === 3) nested.push(r.bytes());
      else if (field === 4) enums.push(r.bytes());
      else r.skip(wire, field);
    }
    const full = scope + messageName;
    this.#symbols.set(full, file);
    this.#messages.add(full);
    for (const n of nested) this.#addMessage(n, `${full}.`, file);
    for (const e of enums) this.#symbols.set(`${full}.${nameOf(e)}`, file);
  }
}

/** Field 1 (`name`) of a descriptor message. */
function nameOf(bytes: Uint8Array): string {
  const r = new BinaryReader(bytes);
  while (r.pos < r.len) {
    const [field, wire] = r.tag();
    if (field === 1 && wire === WireType.LengthDelimited) return r.string();
    r.skip(wire, field);
  }
  return '';
}

/** Where gen/descriptor.binpb is, from src/server (tsx, vitest) or dist/src/server (built). */
export function findDescriptorSet(): string | undefined {
  for (const rel of ['../../gen/descriptor.binpb', '../../../gen/descriptor.binpb']) {
    const p = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(p)) return p;
  }
  return undefined;
}

/** Answers one reflection request. */
export function answer(index: DescriptorIndex, req: ServerReflectionRequest): ServerReflectionResponse {
  const base = { validHost: req.host, originalRequest: req };
  const files = (list: Uint8Array[] | undefined, what: string): ServerReflectionResponse => list
    ? { ...base, messageResponse: { $case: 'fileDescriptorResponse', value: { fileDescriptorProto: list.map((b) => Buffer.from(b)) } } }
    : { ...base, messageResponse: { $case: 'errorResponse', value: { errorCode: Code.NOT_FOUND, errorMessage: `${what} not found` } } };
  const m = req.messageRequest;
  switch (m?.$case) {
    case 'listServices':
      return { ...base, messageResponse: { $case: 'listServicesResponse', value: { service: index.services.map((name) => ({ name })) } } };
    case 'fileByFilename':
      return files(index.fileWithDependencies(m.value), `file ${JSON.stringify(m.value)}`);
    case 'fileContainingSymbol': {
      const file = index.fileOfSymbol(m.value);
      return files(file === undefined ? undefined : index.fileWithDependencies(file), `symbol ${JSON.stringify(m.value)}`);
    }
    case 'fileContainingExtension':
      // The schema declares no extensions.
      return files(undefined, `extension ${m.value.extensionNumber} of ${JSON.stringify(m.value.containingType)}`);
    case 'allExtensionNumbersOfType':
      return index.hasMessage(m.value)
        ? { ...base, messageResponse: { $case: 'allExtensionNumbersResponse', value: { baseTypeName: m.value.replace(/^\./, ''), extensionNumber: [] } } }
        : files(undefined, `type ${JSON.stringify(m.value)}`);
    default:
      return { ...base, messageResponse: { $case: 'errorResponse', value: { errorCode: Code.INVALID_ARGUMENT, errorMessage: 'message_request is not set' } } };
  }
}

/**
 * The ServerReflectionInfo handler table (the same for v1 and v1alpha: the messages are
 * identical). One answer per request, written only while the client reads: a client that gives
 * the stream a zero window holds at most one pending answer here (plus the transport's
 * high-water mark), not every answer its requests asked for.
 */
export function reflectionHandlers(index: DescriptorIndex): HandlerTable {
  return {
    serverReflectionInfo: bidi<ServerReflectionRequest, ServerReflectionResponse>('public', (ctx, requests, sink) => {
      void (async () => {
        try {
          for await (const req of requests) {
            if (ctx.cancelled) return;
            if (!sink.write(answer(index, req))) await new Promise<void>((resolve) => sink.onDrain(resolve));
          }
          sink.end();
        } catch (e) {
          sink.end(e);
        }
      })();
    }),
  };
}

/** Loads the descriptor set; undefined when it is missing (reflection is then not offered). */
export function loadDescriptorIndex(path = findDescriptorSet()): DescriptorIndex | undefined {
  return path === undefined ? undefined : new DescriptorIndex(readFileSync(path));
}
