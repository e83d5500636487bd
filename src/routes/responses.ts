import { responses } from '../dialects/responses.js';
import type { RescuedEndpoint } from './rescued.js';

/** The OpenAI Responses API: Codex CLI, and its own compaction call, which can overflow too. */
export const responsesEndpoints: RescuedEndpoint[] = [
  { path: '/v1/responses', upstreamPath: '/responses', dialect: responses },
  { path: '/v1/responses/compact', upstreamPath: '/responses/compact', dialect: responses },
];
