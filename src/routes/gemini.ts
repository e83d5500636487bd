import { gemini } from '../dialects/gemini.js';
import type { RescuedEndpoint } from './rescued.js';

/**
 * The Gemini API (Gemini CLI, the @google/genai SDK): the model is in the path, as clients build
 * it at the base URL's root (`/v1beta/models/{model}:generateContent`, and
 * `:streamGenerateContent?alt=sse`, whose events are whole answers). The gateway's own upstream
 * key goes as `x-goog-api-key`. countTokens and the rest of /v1beta are passed through.
 */
const MODEL = ':model(^[^:]+)';

const model = (params: Record<string, string>) => params.model;
const at = (action: string) => (params: Record<string, string>) => `/v1beta/models/${encodeURIComponent(params.model)}:${action}`;

export const geminiEndpoints: RescuedEndpoint[] = [
  { path: `/v1beta/models/${MODEL}::generateContent`, upstreamPath: at('generateContent'), model, dialect: gemini, credentials: 'x-goog-api-key' },
  { path: `/v1beta/models/${MODEL}::streamGenerateContent`, upstreamPath: at('streamGenerateContent'), model, dialect: gemini, credentials: 'x-goog-api-key' },
];

/** The route as metrics name it: the model parameter, not its pattern. */
export function geminiRouteLabel(matched: string): string {
  return matched.replace(`${MODEL}::`, '{model}:');
}
