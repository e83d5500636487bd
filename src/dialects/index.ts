import { chat } from './chat.js';
import { gemini } from './gemini.js';
import { messages } from './messages.js';
import { responses } from './responses.js';
import type { Api, Dialect } from './types.js';

export type { Api, Dialect } from './types.js';

/** Every API the gateway rescues, by name (the summarizer may speak another than the request). */
export const DIALECTS: Readonly<Record<Api, Dialect>> = { chat, responses, messages, gemini };
