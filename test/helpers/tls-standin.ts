import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { completion, json, sse, streamEvents } from './fake-upstream.js';

/*
 * An OpenAI-shaped provider behind TLS with a private CA, as inside a company: its certificate
 * is for 127.0.0.1 and signed by a CA that no Node.js trusts until told (a `caFile`, or
 * NODE_EXTRA_CA_CERTS). The CA and certificate are made at test time with the openssl CLI in a
 * fresh folder, so nothing secret is checked in and nothing outlives the test. It serves chat
 * completions (OpenAI's context-length 400 over `limitBytes`, a short summary to the gateway's
 * summarizer calls) and GET /v1/models.
 */

const OPENSSL = '/usr/bin/openssl';

/** A private CA and a server certificate it signed for 127.0.0.1 and localhost. */
export interface PrivateCa {
  dir: string;
  /** The CA's certificate, PEM: what a `caFile` or NODE_EXTRA_CA_CERTS points at. */
  caPem: string;
  serverKey: string;
  serverCert: string;
  remove(): void;
}

export function makePrivateCa(): PrivateCa {
  const dir = mkdtempSync(join(tmpdir(), 'egress-ca-'));
  const at = (name: string) => join(dir, name);
  // P-256 keys: generated in milliseconds, where RSA would take a noticeable share of the test.
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  const run = (args: string[]) => execFileSync(OPENSSL, args, { stdio: 'pipe', timeout: 10_000 });
  run([
    'req',
    '-x509',
    ...ec,
    '-keyout',
    at('ca.key'),
    '-out',
    at('ca.pem'),
    '-days',
    '2',
    '-subj',
    '/CN=compaction-gateway egress test CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  run(['req', ...ec, '-keyout', at('server.key'), '-out', at('server.csr'), '-subj', '/CN=127.0.0.1']);
  writeFileSync(
    at('server.ext'),
    'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n',
  );
  run([
    'x509',
    '-req',
    '-in',
    at('server.csr'),
    '-CA',
    at('ca.pem'),
    '-CAkey',
    at('ca.key'),
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    at('server.ext'),
    '-out',
    at('server.pem'),
  ]);
  return {
    dir,
    caPem: at('ca.pem'),
    serverKey: at('server.key'),
    serverCert: at('server.pem'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** One request as the stand-in received it. */
interface TlsReceived {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  json: any;
  /** Marked `x-gateway-compaction: summarizer` by the gateway. */
  summarizer: boolean;
  /** The peer's port: a forward proxy's outbound port when the request came through its tunnel. */
  remotePort: number;
  status: number;
}

export interface TlsStandin {
  /** https://127.0.0.1:PORT */
  origin: string;
  /** origin + '/v1' */
  baseUrl: string;
  port: number;
  received: TlsReceived[];
  mainCalls(): TlsReceived[];
  summarizerCalls(): TlsReceived[];
  /** TLS handshakes completed (a failed verification on the client's side never completes one). */
  handshakes(): number;
  close(): Promise<void>;
}

export interface TlsStandinOptions {
  ca: PrivateCa;
  /** A chat request whose body is over this many bytes is refused with OpenAI's context-length 400. */
  limitBytes: number;
  answer?: string;
}

const BYTES_PER_TOKEN = 4;

export async function startTlsStandin(options: TlsStandinOptions): Promise<TlsStandin> {
  const received: TlsReceived[] = [];
  const sockets = new Set<Socket>();
  let handshakes = 0;
  const server: Server = createServer(
    { key: readFileSync(options.ca.serverKey), cert: readFileSync(options.ca.serverCert) },
    async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const body = Buffer.concat(chunks);
      let parsed: any;
      try {
        parsed = JSON.parse(body.toString('utf8'));
      } catch {
        parsed = undefined;
      }
      const call: TlsReceived = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body,
        json: parsed,
        summarizer: req.headers['x-gateway-compaction'] === 'summarizer',
        remotePort: req.socket.remotePort ?? 0,
        status: 200,
      };
      received.push(call);
      // A pass-through path, to see that it leaves the same way as the rescued ones.
      if (call.method === 'GET' && call.path === '/v1/models') {
        return json(res, 200, {
          object: 'list',
          data: [{ id: 'fake-model', object: 'model', created: 1_700_000_000, owned_by: 'standin' }],
        });
      }
      if (call.method !== 'POST' || call.path !== '/v1/chat/completions') {
        call.status = 404;
        return json(res, 404, {
          error: { message: `Invalid URL (${call.method} ${call.path})`, type: 'invalid_request_error', param: null, code: null },
        });
      }
      if (call.summarizer) {
        const transcript = String(parsed?.messages?.at(-1)?.content ?? '');
        return json(
          res,
          200,
          completion(`SUMMARY of ${transcript.length} characters: the user asked to fix the build.`, 'chatcmpl-summary'),
        );
      }
      if (body.length > options.limitBytes) {
        call.status = 400;
        return contextLength(res, body.length, options.limitBytes);
      }
      if (parsed?.stream) return sse(res, streamEvents([options.answer ?? 'answered over tls']));
      return json(res, 200, completion(options.answer ?? 'answered over tls', 'chatcmpl-tls'));
    },
  );
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.on('secureConnection', () => handshakes++);
  // A client that rejects the certificate hangs up mid-handshake; that is what some tests expect.
  server.on('tlsClientError', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const origin = `https://127.0.0.1:${port}`;
  return {
    origin,
    baseUrl: `${origin}/v1`,
    port,
    received,
    mainCalls: () => received.filter((r) => !r.summarizer),
    summarizerCalls: () => received.filter((r) => r.summarizer),
    handshakes: () => handshakes,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * OpenAI's refusal of a prompt over the window, in its wire format (2-space JSON, a trailing
 * newline) and words: test/fixtures/upstream-errors.json, openai-ctx-messages-compact and
 * openai-ctx-messages-plus-completion-pretty. The window is the limit counted at 4 bytes a token.
 */
function contextLength(res: ServerResponse, bytes: number, limitBytes: number): void {
  const window = Math.floor(limitBytes / BYTES_PER_TOKEN);
  const tokens = Math.ceil(bytes / BYTES_PER_TOKEN);
  const error = {
    message: `This model's maximum context length is ${window} tokens. However, your messages resulted in ${tokens} tokens. Please reduce the length of the messages.`,
    type: 'invalid_request_error',
    param: 'messages',
    code: 'context_length_exceeded',
  };
  json(res, 400, `${JSON.stringify({ error }, null, 2)}\n`);
}
