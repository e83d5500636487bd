import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import type { RequestNotes } from '../context.js';
import { lazyChildLogger } from '../logging.js';
import { byPrefix } from '../upstream/upstreams.js';
import type { RescueDeps } from '../rescue/context.js';
import { collectBody } from './request-body.js';
import { serveRescued, type RescuedEndpoint, type RescuedExchange } from './rescued.js';

/*
 * The rescued endpoints' own way in, ahead of fastify's router. Every agent request goes through
 * one of them, and fastify's per-request machinery (request and reply objects, the hook chain, the
 * content-type parser, the hijack) cost about a fifth of the gateway's CPU per small request in
 * the benchmark, more than everything the rescue itself does on the way through. The front door
 * takes a POST whose path is exactly a rescued endpoint's and serves it with the same code
 * fastify's route runs (`serveRescued`), the same request id, log line and metrics. Whatever it
 * would have to answer differently from a plain forward goes to fastify instead, untouched, and is
 * answered there as before: a request while the server closes (503), a missing or wrong gateway
 * key (401), a declared body over the limit (413), a content type that is absent (fastify reads
 * such a body too) or that fastify might find invalid (415), a path the router would have to
 * decode.
 */

export interface FrontDoorOptions {
  deps: RescueDeps;
  endpoints: readonly RescuedEndpoint[];
  /** The gateway-key check, when keys are configured. */
  keyCheck: ((authorization: string | undefined, apiKey?: string | string[]) => boolean) | null;
  /** True once the server has begun to close. */
  closing: () => boolean;
  log: () => FastifyBaseLogger;
  /** The access line and request metrics, when the response has finished. */
  record: (request: RecordedRequest, status: number, elapsedMs: number) => void;
  /** Answers a body that could not be read (over the limit mid-stream, cut off; fastify's error codes), or a bug. */
  answerError: (exchange: RescuedExchange, err: Error) => void;
}

export interface RecordedRequest {
  id: string;
  method: string;
  url: string;
  notes: RequestNotes | null;
}

/** The request handler's first step: true when it took the request, false to leave it to fastify. */
export type FrontDoor = (req: IncomingMessage, res: ServerResponse) => boolean;

export function frontDoor(opts: FrontDoorOptions): FrontDoor {
  const byPath = new Map(opts.endpoints.map((e) => [e.path, e]));
  const limit = opts.deps.config.server.bodyLimitBytes;
  return (req, res) => {
    const url = req.url ?? '';
    const query = url.indexOf('?');
    if (req.method !== 'POST') return false;
    const path = query < 0 ? url : url.slice(0, query);
    // The endpoint itself, or under an upstream's prefix (`/anthropic/v1/messages`).
    let endpoint = byPath.get(path);
    const prefixed = endpoint ? null : byPrefix(opts.deps.upstreams, path);
    if (prefixed) endpoint = byPath.get(prefixed.rest);
    if (!endpoint || opts.closing()) return false;
    if (opts.keyCheck && !opts.keyCheck(req.headers.authorization, req.headers['x-api-key'])) return false;
    if (Number(req.headers['content-length']) > limit || !PLAIN_MEDIA_TYPE.test(req.headers['content-type'] ?? '')) return false;

    const started = performance.now();
    const id = requestIdOf(req);
    const exchange: RescuedExchange = { id, url, headers: req.headers, log: lazyChildLogger(opts.log(), { requestId: id }, {}), notes: { route: endpoint.path }, res };
    const finished = () => {
      res.off('finish', finished).off('error', finished);
      try {
        opts.record({ id, method: 'POST', url, notes: exchange.notes }, res.statusCode, performance.now() - started);
      } catch (err) {
        exchange.log.error({ err }, 'recording the request failed');
      }
    };
    res.on('finish', finished).on('error', finished);
    collectBody(req, limit, (err, chunks) => {
      if (err) opts.answerError(exchange, err);
      // serveRescued answers its own failures; what escapes it is a bug, answered as fastify would (500, logged).
      else serveRescued(opts.deps, endpoint, exchange, chunks, prefixed?.upstream).catch((bug: Error) => opts.answerError(exchange, bug));
    });
    return true;
  };
}

/**
 * `type/subtype`, both RFC 9110 tokens, then parameters or nothing: a subset of what fastify's
 * content-type parser accepts (it reads only the part before the first `;` to decide).
 */
const PLAIN_MEDIA_TYPE = /^[\w!#$%&'*+.^`|~-]+\/[\w!#$%&'*+.^`|~-]+(?:;.*)?$/;

const REQUEST_ID = /^[\w.:@/+=-]{1,128}$/;

/** The client's own x-request-id when it is a sane token, else a new UUID. */
export function requestIdOf(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}
