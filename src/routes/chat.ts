import { chat } from '../dialects/chat.js';
import type { RescuedEndpoint } from './rescued.js';

/** OpenAI chat completions: pi, opencode, qwen-code, Aider and the OpenAI SDKs. */
export const CHAT_ROUTE = '/v1/chat/completions';

export const chatEndpoints: RescuedEndpoint[] = [{ path: CHAT_ROUTE, upstreamPath: '/chat/completions', dialect: chat }];
