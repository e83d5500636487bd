import { messages } from '../dialects/messages.js';
import type { RescuedEndpoint } from './rescued.js';

/**
 * The Anthropic Messages API: Claude Code (which adds `?beta=true`, kept on the way up). The
 * gateway's own upstream key goes as `x-api-key`, as Anthropic expects it. count_tokens and the
 * rest of /v1/messages/* are passed through.
 */
export const messagesEndpoints: RescuedEndpoint[] = [
  { path: '/v1/messages', upstreamPath: '/messages', dialect: messages, credentials: 'x-api-key' },
];
