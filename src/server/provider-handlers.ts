/**
 * GetMessages in a provider's format and ImportMessages (issue #34): decode, call the app
 * (src/app/rendered-messages.ts, src/app/import-messages.ts), encode. GetMessages keeps its
 * entry in handlers.ts, which hands a request with a provider `format` to `renderedMessages`.
 */
import type { CallContext, SessionService } from '../app/session-service.js';
import { DomainError } from '../domain/errors.js';
import { messageJsonText } from '../domain/derive.js';
import type { ProviderFormat } from '../domain/render/index.js';
import {
  MessageFormat, MessageView,
  type GetMessagesRequest, type GetMessagesResponse, type ImportMessagesRequest, type ImportMessagesResponse,
} from '../../gen/palimpsest/v1/service.js';
import { unary, type HandlerTable } from './rpc/handler-table.js';

/** The provider format of a MessageFormat, or undefined for UNSPECIFIED / DSH (today's shape). */
export function providerFormatOf(f: MessageFormat): ProviderFormat | undefined {
  switch (f) {
    case MessageFormat.MESSAGE_FORMAT_OPENAI_CHAT:
      return 'openai-chat';
    case MessageFormat.MESSAGE_FORMAT_OPENAI_RESPONSES:
      return 'openai-responses';
    case MessageFormat.MESSAGE_FORMAT_ANTHROPIC:
      return 'anthropic';
    case MessageFormat.MESSAGE_FORMAT_GEMINI:
      return 'gemini';
    default:
      return undefined;
  }
}

/** GetMessages with a provider `format` (the rendered model history in `rendered`). */
export async function renderedMessages(app: SessionService, ctx: CallContext, id: string, r: GetMessagesRequest, format: ProviderFormat): Promise<GetMessagesResponse> {
  if (r.view !== MessageView.MESSAGE_VIEW_MODEL_HISTORY) {
    throw new DomainError('FORMAT_NEEDS_MODEL_HISTORY', 'format renders the model history; ask for view MESSAGE_VIEW_MODEL_HISTORY (the transcript is DSH only)', { field: 'format' });
  }
  const page = await app.getRenderedMessagesPage(ctx, id, { format, pageSize: r.pageSize, pageToken: r.pageToken, asOfSeq: r.asOfSeq, dropUnpaired: r.dropUnpaired, blobRefs: r.blobRefs });
  return {
    messages: [],
    headSeq: page.headSeq,
    nextPageToken: page.nextPageToken,
    rendered: page.messages.map((m) => ({ providerJson: messageJsonText(m.json), seqs: m.seqs, tokens: m.tokens })),
  };
}

/** The ImportMessages handler, merged into the SessionService handler object. */
export function providerHandlers(app: SessionService, requireId: (id: string) => string): HandlerTable {
  return {
    importMessages: unary<ImportMessagesRequest, ImportMessagesResponse>('append', async (ctx, r) => {
      const format = providerFormatOf(r.format);
      if (format === undefined) throw new DomainError('FORMAT_UNSPECIFIED', 'format is required: one of MESSAGE_FORMAT_OPENAI_CHAT, _OPENAI_RESPONSES, _ANTHROPIC, _GEMINI (append DSH events with AppendEvents)', { field: 'format' });
      const res = await app.importMessages(ctx.caller, requireId(r.sessionId), { format, messagesJson: r.messagesJson, provider: r.provider || undefined, model: r.model || undefined });
      return { seqs: res.seqs, headSeq: res.headSeq };
    }),
  };
}
