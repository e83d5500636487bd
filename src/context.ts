/** What the gateway learns about one request while serving it; read by the request log and metrics. */
export interface RequestNotes {
  route: string;
  /** The request's `model`, when the route read it (for the access log). */
  model?: string;
  upstreamStatus?: number;
  upstreamTtfbMs?: number;
  streamed?: boolean;
  /** The x-gateway-compaction header value when the rescue path ran. */
  compaction?: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    notes: RequestNotes;
  }
}
