import { chat } from '../dialects/chat.js';
import type { RescuedEndpoint } from './rescued.js';

/** OpenAI chat completions: pi, opencode, qwen-code, Aider and the OpenAI SDKs. */
export const chatEndpoints: RescuedEndpoint[] = [{ path: '/v1/chat/completions', upstreamPath: '/chat/completions', dialect: chat }];
