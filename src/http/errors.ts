import { DIALECTS, type Api } from '../dialects/index.js';

/** Callers and tests match on `code`; docs/errors.md lists each (tables.test.ts keeps them equal). Upstream errors are never rewritten. */
export const ERRORS = {
  invalid_json: { status: 400, type: 'invalid_request_error', message: 'The request body is not valid JSON.' },
  bad_request: { status: 400, type: 'invalid_request_error', message: 'The request is malformed.' },
  invalid_path: { status: 400, type: 'invalid_request_error', message: 'The request path is not allowed.' },
  model_unreadable: {
    status: 400,
    type: 'invalid_request_error',
    message: "The gateway routes by model and could not read this request's model.",
  },
  invalid_api_key: { status: 401, type: 'authentication_error', message: 'Missing or invalid gateway API key.' },
  not_found: { status: 404, type: 'invalid_request_error', message: 'Unknown route.' },
  no_upstream: { status: 404, type: 'invalid_request_error', message: 'No upstream of this gateway serves this request.' },
  request_timeout: { status: 408, type: 'invalid_request_error', message: 'The request was not received in time.' },
  request_too_large: { status: 413, type: 'invalid_request_error', message: "The request body is larger than the gateway's limit." },
  headers_too_large: {
    status: 431,
    type: 'invalid_request_error',
    message: 'The request line or headers are larger than the gateway accepts.',
  },
  unsupported_media_type: { status: 415, type: 'invalid_request_error', message: 'Unsupported content type or encoding.' },
  upstream_unreachable: { status: 502, type: 'upstream_error', message: 'The upstream could not be reached.' },
  upstream_bad_response: { status: 502, type: 'upstream_error', message: 'The upstream failed while answering.' },
  upstream_timeout: { status: 504, type: 'upstream_error', message: 'The upstream did not answer in time.' },
  shutting_down: { status: 503, type: 'server_error', message: 'The gateway is shutting down.' },
  internal_error: { status: 500, type: 'server_error', message: 'The gateway failed unexpectedly.' },
} as const satisfies Record<string, { status: number; type: string; message: string }>;

export type ErrorCode = keyof typeof ERRORS;

export class GatewayError extends Error {
  readonly status: number;
  readonly type: string;
  readonly param: string | null;

  constructor(
    readonly code: ErrorCode,
    message?: string,
    options?: { cause?: unknown; param?: string },
  ) {
    super(message ?? ERRORS[code].message, { cause: options?.cause });
    this.status = ERRORS[code].status;
    this.type = ERRORS[code].type;
    this.param = options?.param ?? null;
  }

  toJSON(): OpenAIErrorBody {
    return errorBody(this.code, this.message, this.param);
  }

  bodyFor(api: Api | undefined): unknown {
    return errorBodyFor(api, this.code, this.message, this.param);
  }
}

/** As each API's clients parse their provider's errors (its dialect's `errorBody`); OpenAI's shape when the API is not known. */
export function errorBodyFor(api: Api | undefined, code: ErrorCode, message?: string, param: string | null = null): unknown {
  if (api === undefined) return errorBody(code, message, param);
  const { status, type } = ERRORS[code];
  return DIALECTS[api].errorBody({ status, type, code, message: message ?? ERRORS[code].message, param });
}

export interface OpenAIErrorBody {
  error: { message: string; type: string; code: string; param: string | null };
}

export function errorBody(code: ErrorCode, message?: string, param: string | null = null): OpenAIErrorBody {
  return { error: { message: message ?? ERRORS[code].message, type: ERRORS[code].type, code, param } };
}

/** undici error codes, translated once: what the caller of the gateway should see. */
export function fromUpstreamFailure(err: unknown): GatewayError {
  const code = (err as { code?: string } | null)?.code ?? '';
  const detail = (err as Error | null)?.message ?? String(err);
  // Node's messages usually carry their code already ("connect ECONNREFUSED 127.0.0.1:1").
  const said = code && !detail.includes(code) ? `${code}: ${detail}` : detail;
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return new GatewayError('upstream_timeout', `The upstream did not answer in time (${code}).`, { cause: err });
  }
  // A forward proxy that would not open the tunnel (407: its credentials; 403: a destination it refuses).
  const tunnel = /^Proxy response \((\d{3})\)/.exec(detail);
  if (tunnel) {
    return new GatewayError(
      'upstream_unreachable',
      `The forward proxy refused to connect to the upstream (it answered ${tunnel[1]}${tunnel[1] === '407' ? ': check the proxy credentials' : ''}).`,
      { cause: err },
    );
  }
  if (code === 'UND_ERR_CONNECT_TIMEOUT') {
    return new GatewayError('upstream_unreachable', `Connecting to the upstream timed out (${code}).`, { cause: err });
  }
  if (
    code === 'ECONNREFUSED' ||
    code === 'ENOTFOUND' ||
    code === 'EAI_AGAIN' ||
    code === 'EHOSTUNREACH' ||
    code === 'ENETUNREACH' ||
    code === 'UND_ERR_SOCKET' ||
    code === 'ECONNRESET' ||
    code === 'EPIPE'
  ) {
    return new GatewayError('upstream_unreachable', `The upstream could not be reached (${said}).`, { cause: err });
  }
  return new GatewayError('upstream_bad_response', `The upstream failed while answering (${code || detail}).`, { cause: err });
}

/** No stack: operating conditions, not bugs. With `sentStatus` the response had started (relayed): the client got that, then a cut. */
export function failureLog(error: GatewayError, sentStatus?: number): { fields: FailureFields; message: string } {
  const cause = error.cause as { code?: unknown } | undefined;
  const causeCode = typeof cause?.code === 'string' ? cause.code : undefined;
  if (sentStatus !== undefined) {
    return {
      fields: { status: sentStatus, code: error.code, cause: causeCode, cut: true },
      message: `cut the connection after ${sentStatus} was sent (the client sees a truncated response): ${error.code}: ${error.message}`,
    };
  }
  return {
    fields: { status: error.status, code: error.code, cause: causeCode },
    message: `answered ${error.status} ${error.code}: ${error.message}`,
  };
}

export interface FailureFields {
  status: number;
  code: ErrorCode;
  cause: string | undefined;
  cut?: true;
}
