/** The provider formats of the renderers (issue #34). */

/** The provider formats (the CLI and docs spell them this way). */
export const PROVIDER_FORMATS = ['openai-chat', 'openai-responses', 'anthropic', 'gemini'] as const;

/** A provider format. */
export type ProviderFormat = (typeof PROVIDER_FORMATS)[number];

/** True iff `s` names a provider format. */
export function isProviderFormat(s: string): s is ProviderFormat {
  return (PROVIDER_FORMATS as readonly string[]).includes(s);
}
