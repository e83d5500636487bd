import { request as httpRequest } from 'node:http';
import { GoogleGenAI } from '@google/genai';
import { afterEach, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startStandIn, type StandIn } from '../helpers/provider.js';

/*
 * On the Gemini API the model is a path segment, and the gateway builds the upstream path from it
 * before sending the gateway's own key. A model segment that a server would resolve elsewhere once
 * decoded (encoded slashes, dot segments, backslashes, their double-encoded forms) is refused with
 * the 400 invalid_path the pass-through gives the same path, in Google's error shape, and nothing
 * reaches the upstream; an ordinary model goes as before.
 */

const OWN_KEY = 'AIza-gateway-own-key-path-test';
const CLIENT_KEY = 'AIza-client-path-test';

let standIn: StandIn | undefined;
let gateway: TestGateway | undefined;
afterEach(async () => {
  await gateway?.close();
  await standIn?.close();
  gateway = standIn = undefined;
});

async function setup(): Promise<TestGateway> {
  standIn = await startStandIn();
  gateway = await startGateway({ upstreams: { google: { url: standIn.origin, apiKey: OWN_KEY, apis: ['gemini'] } } });
  return gateway;
}

/** POSTs to the path exactly as written: fetch would resolve its dot segments first. */
function post(path: string, body: unknown): Promise<{ status: number; json: any }> {
  const url = new URL(gateway!.origin);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-goog-api-key': CLIENT_KEY },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

const BODY = { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] };

describe('a Gemini model segment that would resolve elsewhere upstream', () => {
  it.each([
    '..%2F..%2Fv1%2Fmodels',
    '..%2f..%2fv1%2fmodels',
    'gemini-2.5-pro%2F..%2F..%2Fv1%2Fmodels',
    '%2e%2e',
    '%2E%2E%2Fx',
    '..%5C..%5Cv1',
    '..%252F..%252Fv1',
    'gemini%00',
  ])('%s: 400 invalid_path in Google\u2019s shape, on both rescued actions and under the prefix; nothing sent', async (model) => {
    await setup();
    const paths = [
      `/v1beta/models/${model}:generateContent`,
      `/v1beta/models/${model}:streamGenerateContent?alt=sse`,
      `/google/v1beta/models/${model}:generateContent`,
      // The pass-through's answer to the same model, for comparison.
      `/v1beta/models/${model}:countTokens`,
    ];
    for (const path of paths) {
      const res = await post(path, BODY);
      expect(res.status, path).toBe(400);
      expect(res.json.error, path).toMatchObject({
        code: 400,
        status: 'INVALID_ARGUMENT',
        details: [expect.objectContaining({ reason: 'INVALID_PATH' })],
      });
    }
    expect(standIn!.received.map((r) => r.url)).toEqual([]);
  });

  it('an ordinary model goes upstream with the gateway\u2019s key, through the SDK', async () => {
    const gw = await setup();
    const ai = new GoogleGenAI({ apiKey: CLIENT_KEY, httpOptions: { baseUrl: gw.origin } });
    const answer = await ai.models.generateContent({ model: 'gemini-2.5-pro', ...BODY });
    expect(answer.candidates?.[0]?.content?.parts?.length).toBeGreaterThan(0);
    expect(standIn!.received.map((r) => [r.url, r.headers['x-goog-api-key']])).toEqual([
      ['/v1beta/models/gemini-2.5-pro:generateContent', OWN_KEY],
    ]);
  });
});
