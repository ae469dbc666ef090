/** The provider formats of `messages --format` and `import --from` (docs/providers.md). */
import { MessageFormat } from '../../../gen/palimpsest/v1/service.js';
import { UsageError } from '../args.js';

/** The format names, as the CLI spells them. */
export const PROVIDER_FORMATS = ['openai-chat', 'openai-responses', 'anthropic', 'gemini'] as const;

const BY_NAME: Record<string, MessageFormat> = {
  'openai-chat': MessageFormat.MESSAGE_FORMAT_OPENAI_CHAT,
  'openai-responses': MessageFormat.MESSAGE_FORMAT_OPENAI_RESPONSES,
  anthropic: MessageFormat.MESSAGE_FORMAT_ANTHROPIC,
  gemini: MessageFormat.MESSAGE_FORMAT_GEMINI,
};

/** The MessageFormat of a CLI format name; a usage error naming the choices otherwise. */
export function messageFormatOf(name: string): MessageFormat {
  const f = BY_NAME[name];
  if (f === undefined) throw new UsageError(`unknown format ${JSON.stringify(name)}; use one of ${PROVIDER_FORMATS.join(', ')}`);
  return f;
}
