import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';

/*
 * An OTLP/HTTP traces receiver on loopback, as strict as the collector's: POST /v1/traces only,
 * `application/json` (OTLP/JSON: hex ids, string nanosecond times), optionally gzip; anything
 * else is refused with the collector's status (405, 404, 415, 400) and recorded as a refusal.
 */

type AttributeValue = string | number | boolean | AttributeValue[] | null;

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  /** Nanoseconds since the epoch. */
  start: bigint;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, AttributeValue>;
  /** 0 unset, 1 ok, 2 error. */
  status: number;
  resource: Record<string, AttributeValue>;
  scope: string;
}

export interface OtlpReceiver {
  /** http://127.0.0.1:PORT: what OTEL_EXPORTER_OTLP_ENDPOINT is set to. */
  origin: string;
  /** TCP connections accepted so far. */
  connections(): number;
  /** Every export body as it came (decoded from gzip), text. */
  payloads(): string[];
  spans(): ReceivedSpan[];
  /** Requests refused, with why. */
  refused(): string[];
  close(): Promise<void>;
}

const SPAN_KIND = {
  SPAN_KIND_UNSPECIFIED: 0,
  SPAN_KIND_INTERNAL: 1,
  SPAN_KIND_SERVER: 2,
  SPAN_KIND_CLIENT: 3,
  SPAN_KIND_PRODUCER: 4,
  SPAN_KIND_CONSUMER: 5,
} as const;

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  let connections = 0;
  const payloads: string[] = [];
  const spans: ReceivedSpan[] = [];
  const refused: string[] = [];
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const refuse = (status: number, why: string) => {
      refused.push(why);
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ code: 3, message: why }));
    };
    if (req.method !== 'POST') return refuse(405, `method ${req.method}`);
    if (req.url !== '/v1/traces') return refuse(404, `path ${req.url}`);
    if (!/^application\/json\s*(;|$)/.test(req.headers['content-type'] ?? ''))
      return refuse(415, `content-type ${req.headers['content-type']}`);
    let text: string;
    try {
      const raw = Buffer.concat(chunks);
      text = (req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw).toString('utf8');
    } catch {
      return refuse(400, 'body: not gzip');
    }
    let decoded: ReceivedSpan[];
    try {
      decoded = decodeRequest(JSON.parse(text));
    } catch (err) {
      return refuse(400, `body: ${(err as Error).message}`);
    }
    payloads.push(text);
    spans.push(...decoded);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"partialSuccess":{}}');
  });
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    connections: () => connections,
    payloads: () => [...payloads],
    spans: () => [...spans],
    refused: () => [...refused],
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** An ExportTraceServiceRequest in OTLP/JSON, checked field by field as the collector would. */
function decodeRequest(body: any): ReceivedSpan[] {
  if (!Array.isArray(body?.resourceSpans)) throw new Error('no resourceSpans');
  const out: ReceivedSpan[] = [];
  for (const rs of body.resourceSpans) {
    const resource = attributesOf(rs.resource?.attributes ?? []);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        if (!/^[0-9a-f]{32}$/.test(s.traceId)) throw new Error(`traceId ${s.traceId}: not 32 hex digits`);
        if (!/^[0-9a-f]{16}$/.test(s.spanId)) throw new Error(`spanId ${s.spanId}: not 16 hex digits`);
        if (s.parentSpanId !== undefined && s.parentSpanId !== '' && !/^[0-9a-f]{16}$/.test(s.parentSpanId))
          throw new Error(`parentSpanId ${s.parentSpanId}`);
        if (typeof s.name !== 'string' || s.name === '') throw new Error('span without a name');
        for (const t of [s.startTimeUnixNano, s.endTimeUnixNano]) if (!/^\d+$/.test(String(t))) throw new Error(`time ${t}`);
        if (BigInt(s.endTimeUnixNano) < BigInt(s.startTimeUnixNano)) throw new Error(`span ${s.name} ends before it starts`);
        const kind = typeof s.kind === 'string' ? SPAN_KIND[s.kind as keyof typeof SPAN_KIND] : s.kind;
        if (typeof kind !== 'number') throw new Error(`kind ${s.kind}`);
        out.push({
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId ?? '',
          name: s.name,
          start: BigInt(s.startTimeUnixNano),
          kind,
          attributes: attributesOf(s.attributes ?? []),
          status: s.status?.code ?? 0,
          resource,
          scope: String(ss.scope?.name ?? ''),
        });
      }
    }
  }
  return out;
}

function attributesOf(list: Array<{ key: string; value: any }>): Record<string, AttributeValue> {
  return Object.fromEntries(list.map(({ key, value }) => [key, valueOf(value)]));
}

function valueOf(v: any): AttributeValue {
  if (v === undefined || v === null) return null;
  if ('stringValue' in v) return v.stringValue;
  if ('boolValue' in v) return v.boolValue;
  // int64 in proto3 JSON may come as a number or a decimal string.
  if ('intValue' in v) return Number(v.intValue);
  if ('doubleValue' in v) return Number(v.doubleValue);
  if ('arrayValue' in v) return (v.arrayValue.values ?? []).map(valueOf);
  throw new Error(`attribute value ${JSON.stringify(v)}`);
}
