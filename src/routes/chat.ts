import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Dispatcher } from 'undici';
import type { Config } from '../config/schema.js';
import { GatewayError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import { callUpstream } from '../upstream/client.js';
import { ClientGone } from '../upstream/client-gone.js';
import { requestHeadersForUpstream } from '../upstream/headers.js';
import { inspect, type InspectedAnswer } from '../upstream/inspect.js';
import { ClientResponse } from '../upstream/relay.js';
import type { UpstreamTarget } from '../upstream/target.js';
import type { CompactionMemory } from '../memory/index.js';
import { readChatRequest } from './chat-body.js';
import { compactProactively } from './memory.js';
import { optedOut, replayHeaders, rescue } from './rescue.js';

export interface ChatDeps {
  config: Readonly<Config>;
  dispatcher: Dispatcher;
  target: UpstreamTarget;
  metrics: Metrics;
  /** What the gateway remembers of past compactions; null when memory is off. */
  memory: CompactionMemory | null;
}

export const CHAT_ROUTE = '/v1/chat/completions';

/** Sends one attempt upstream and reads just enough of the answer to judge it. */
export type Attempt = (body: Buffer, headers: Record<string, string | string[]>) => Promise<InspectedAnswer>;

export async function chatRoutes(app: FastifyInstance, deps: ChatDeps): Promise<void> {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: deps.config.server.bodyLimitBytes }, (_req, body, done) =>
    done(null, body),
  );
  app.post(CHAT_ROUTE, (request, reply) => handleChat(deps, request, reply));
}

/**
 * The story of a chat request: attempt -> overlong and nothing sent yet? -> compact and attempt
 * once more -> relay. The client's bytes go upstream unchanged, and no status is written to the
 * client before the upstream's answer has been seen.
 */
async function handleChat(deps: ChatDeps, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const body = request.body as Buffer;
  const chat = readChatRequest(body, request.headers['content-encoding'], deps.config.server.bodyLimitBytes);
  reply.hijack();
  const client = new ClientResponse(reply.raw, request.id);
  const gone = whenClientLeaves(reply);
  const headers = requestHeadersForUpstream(request.headers, request.id, { apiKey: deps.config.upstream.apiKey });
  const send: Attempt = (bytes, h) => attempt(deps, request, bytes, h, gone);
  try {
    const proactive = deps.config.compaction.proactive && !optedOut(request)
      ? await compactProactively(deps, request, chat, headers, gone.signal)
      : null;
    const firstBody = proactive?.body ?? body;
    const first = await send(firstBody, proactive ? replayHeaders(headers, proactive.header) : headers);
    const verdict = first.verdict;
    if (verdict.overlong && !client.committed) {
      const rescued = await rescue({
        deps, request, chat, headers, first, verdict, send,
        signal: gone.signal,
        rejectedBytes: proactive ? proactive.body.length : chat.bytes,
        skipMemory: proactive !== null,
      });
      await client.relay(rescued.answer.answer, rescued.answer.held, { 'x-gateway-compaction': rescued.header });
      return;
    }
    await client.relay(first.answer, first.held, proactive ? { 'x-gateway-compaction': proactive.header } : {});
  } catch (err) {
    failed(request, client, gone, err);
  }
}

async function attempt(
  deps: ChatDeps,
  request: FastifyRequest,
  body: Buffer,
  headers: Record<string, string | string[]>,
  gone: ClientGone,
): Promise<InspectedAnswer> {
  const answer = await callUpstream(deps.dispatcher, {
    target: deps.target,
    path: `${deps.target.basePath}/chat/completions`,
    method: 'POST',
    headers,
    body,
    signal: gone,
  });
  request.notes.upstreamStatus = answer.status;
  request.notes.upstreamTtfbMs = answer.ttfbMs;
  request.notes.streamed = String(answer.headers['content-type'] ?? '').includes('text/event-stream');
  deps.metrics.upstreamTtfb.observe({ route: CHAT_ROUTE }, answer.ttfbMs / 1000);
  return inspect(answer, deps.config.upstream.errorBodyLimitBytes);
}

/** Aborts upstream and summarizer work the moment the client disconnects before its answer ends. */
function whenClientLeaves(reply: FastifyReply): ClientGone {
  const gone = new ClientGone();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) gone.abort();
  });
  return gone;
}

function failed(request: FastifyRequest, client: ClientResponse, gone: ClientGone, err: unknown): void {
  const clientLeft =
    gone.aborted || (err as { code?: string })?.code === 'ERR_STREAM_PREMATURE_CLOSE' || (client.gone && !client.committed);
  if (clientLeft) {
    request.log.info({ reason: (err as Error)?.message }, 'client disconnected; upstream work aborted');
    return;
  }
  if (client.committed) {
    // The status is out: the only honest signal left is to cut the connection.
    request.log.warn({ err }, 'upstream failed after the response started; closing the connection');
    client.sendError(new GatewayError('upstream_bad_response'));
    return;
  }
  const gatewayError = err instanceof GatewayError ? err : new GatewayError('internal_error', undefined, { cause: err });
  request.log.warn({ err, code: gatewayError.code }, 'answering with a gateway error');
  client.sendError(gatewayError);
}
