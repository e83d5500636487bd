/** What the gateway learns about one request while serving it; read by the request log and metrics. */
export interface RequestNotes {
  route: string;
  /** The model the request names: its body's top-level `model` (routes/body-model.ts), or the one its path names. */
  model?: string;
  upstream?: string;
  upstreamStatus?: number;
  upstreamTtfbMs?: number;
  streamed?: boolean;
  /** The x-gateway-compaction header value when the rescue path ran. */
  compaction?: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the onRequest hook on every request (null only before it: fastify decorates with a primitive). */
    notes: RequestNotes | null;
  }
}
