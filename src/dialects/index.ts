import { chat } from './chat.js';
import { gemini } from './gemini.js';
import { messages } from './messages.js';
import { responses } from './responses.js';
import { APIS, type Api, type ApiPrefix, type Dialect } from './types.js';

export { APIS, type Api, type Dialect } from './types.js';

/** Every API the gateway rescues, by name (the summarizer may speak another than the request). */
export const DIALECTS: Readonly<Record<Api, Dialect>> = { chat, responses, messages, gemini };

/** The API a path belongs to (its family, pass-through paths too), or undefined for one of no API (`/v1/models`). */
export function apiOfPath(path: string): Api | undefined {
  return APIS.find((api) => DIALECTS[api].paths.test(path));
}

/** The path prefixes the APIs are served under, each once. */
export const API_PREFIXES: readonly ApiPrefix[] = [...new Set(APIS.map((api) => DIALECTS[api].prefix))];

/** The base path itself where the API's base URL ends in the prefix (`/v1`), else the prefix after it (Gemini's `/v1beta`). */
export function underBase(basePath: string, prefix: ApiPrefix): string {
  const holds = APIS.some((api) => DIALECTS[api].prefix === prefix && DIALECTS[api].upstreamBaseHoldsPrefix);
  return holds ? basePath : `${basePath}${prefix}`;
}
