import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { validateConfig } from '../../src/config/load.js';
import type { ConfigInput } from '../../src/config/schema.js';
import { buildServer } from '../../src/server.js';

export interface TestGateway {
  app: FastifyInstance;
  /** http://127.0.0.1:PORT */
  origin: string;
  /** origin + '/v1': what an agent's base URL is set to. */
  baseUrl: string;
  /** Every log line written so far, raw. */
  logText(): string;
  logLines(): any[];
  close(): Promise<void>;
}

/**
 * Builds the real gateway with injected config, listening on a loopback port 0. Window discovery
 * (upstream.discoverWindows, on by default) is off unless the config turns it on: a test of
 * another feature counts its fake's calls, and a discovery's GETs are not among them. The
 * scenario table and the window tests run with it on.
 */
export async function startGateway(config: ConfigInput): Promise<TestGateway> {
  const chunks: string[] = [];
  const logStream = new Writable({
    write(chunk, _enc, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  const merged = {
    ...config,
    upstream: { discoverWindows: false, ...config.upstream },
    log: { level: 'info' as const, ...config.log },
    server: { port: 0, ...config.server },
  };
  const app = buildServer(validateConfig(merged), { logStream });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  return {
    app,
    origin,
    baseUrl: `${origin}/v1`,
    logText: () => chunks.join(''),
    logLines: () =>
      chunks
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line)),
    close: () => app.close(),
  };
}

/** POSTs a chat body (string or object) to the gateway and reads the whole answer. */
export function postChat(gateway: { baseUrl: string }, body: unknown, headers: Record<string, string> = {}): Promise<Posted> {
  return postJson(`${gateway.baseUrl}/chat/completions`, body, headers);
}

export interface Posted {
  status: number;
  headers: Headers;
  text: string;
  /** The answer parsed, or undefined when it is not JSON. */
  json: any;
}

/** POSTs a JSON body (string, bytes or object) to `url` and reads the whole answer. */
export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Posted> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}
