/**
 * Handler-table entries of blobs (issue #39, docs/blobs.md): GetBlob, a server stream of a
 * tenant's blob in chunks from an offset, over the app's read (src/app/blob-refs.ts
 * readBlobChunks, the same one the web port's `GET /blobs/...` serves). Merged into the handler
 * table by makeHandlers (handlers.ts).
 */
import type { SessionService } from '../app/session-service.js';
import type { GetBlobRequest, GetBlobResponse } from '../../gen/palimpsest/v1/service.js';
import { pipeStream } from './server-stream.js';
import { serverStream, type HandlerTable } from './rpc/handler-table.js';

/** The blob entries of the handler table. */
export function blobHandlers(app: SessionService): HandlerTable {
  return {
    getBlob: serverStream<GetBlobRequest, GetBlobResponse>('read', (ctx, req, sink) => {
      pipeStream(ctx, sink, async function* () {
        for await (const c of app.readBlob(ctx.caller, req.digest, req.offset)) {
          yield { offset: c.offset, data: Buffer.from(c.bytes.buffer, c.bytes.byteOffset, c.bytes.byteLength), size: c.info.size, mediaType: c.info.mediaType };
        }
      });
    }),
  };
}
