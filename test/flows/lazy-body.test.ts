import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startStandIn, type StandIn } from '../helpers/provider.js';
import { agentRequest, parseCompactionHeader } from '../helpers/rescue.js';

/*
 * Nothing parses a request on its way in: the gateway forwards the client's bytes and parses
 * them only when a rescue (or the compaction memory) needs to look inside. JSON.parse is watched
 * for calls on the test's body made by anyone but the fake upstream (the strict stand-in's
 * server), which parses everything it receives (in this same process) for the tests' convenience.
 */

// Built at run time: the literal would be in this file's source map, which vitest parses too.
const MARK = ['lazy', 'body', 'marker', (0x7f3a).toString(16)].join('-');
let upstream: StandIn | undefined;
let gateway: TestGateway | undefined;
/** For each JSON.parse of a text holding MARK outside the fake upstream: how many requests the upstream had received by then. */
let gatewayParses: number[];

beforeEach(() => {
  gatewayParses = [];
  const parse = JSON.parse;
  let inside = false;
  vi.spyOn(JSON, 'parse').mockImplementation(function (this: unknown, text: string, reviver?: (key: string, value: unknown) => unknown) {
    // Formatting a stack parses source maps: not a call to count.
    if (!inside && typeof text === 'string' && text.includes(MARK)) {
      inside = true;
      const stack = new Error().stack ?? '';
      inside = false;
      if (!stack.includes('fake-upstream')) gatewayParses.push(upstream?.received.length ?? -1);
    }
    return parse.call(JSON, text, reviver);
  });
});

afterEach(async () => {
  vi.restoreAllMocks();
  await gateway?.close();
  await upstream?.close();
  gateway = upstream = undefined;
});

function chatBody(bytes: number): string {
  const filler = 'x'.repeat(Math.max(0, bytes - 200));
  return JSON.stringify({ model: 'fake-model', messages: [{ role: 'user', content: `${MARK} ${filler}` }] });
}

it.each([
  ['a small body', 300],
  ['a 2 MB body, which arrives in many chunks', 2_000_000],
])('%s passing through is never parsed, and reaches the upstream byte for byte', async (_name, bytes) => {
  upstream = await startStandIn();
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
  const body = chatBody(bytes);
  const res = await postChat(gateway, body, { authorization: 'Bearer sk-one' });
  expect(res.status).toBe(200);
  expect(upstream.received).toHaveLength(1);
  expect(upstream.verdicts('chat')).toEqual([null]);
  expect(upstream.received[0].body.equals(Buffer.from(body))).toBe(true);
  expect(upstream.received[0].headers['content-length']).toBe(String(Buffer.byteLength(body)));
  expect(upstream.received[0].headers['transfer-encoding']).toBeUndefined();
  expect(gatewayParses).toEqual([]);
});

it('a Responses API request passing through is never parsed either', async () => {
  upstream = await startStandIn();
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
  const body = JSON.stringify({ model: 'fake-model', input: [{ role: 'user', content: MARK }] });
  const res = await fetch(`${gateway.baseUrl}/responses`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  expect(res.status).toBe(200);
  await res.text();
  expect(upstream.received[0].body.toString()).toBe(body);
  expect(upstream.verdicts('responses')).toEqual([null]);
  expect(gatewayParses).toEqual([]);
});

it('a body first parsed only after the upstream refused it is rescued: compacted and replayed', async () => {
  const provider = await startStandIn({ limitBytes: 60_000 });
  upstream = provider;
  gateway = await startGateway({ upstream: { url: provider.baseUrl }, compaction: { strategy: 'fallback' } });
  const request = agentRequest(60);
  (request.messages[0] as { content: string }).content += ` ${MARK}`;
  const body = JSON.stringify(request);
  expect(body.length).toBeGreaterThan(60_000);

  const res = await postChat(gateway, body, { authorization: 'Bearer sk-two' });
  expect(res.status).toBe(200);
  expect(parseCompactionHeader(res.headers.get('x-gateway-compaction'))).toMatchObject({ outcome: 'replayed' });
  const calls = provider.calls('chat');
  expect(calls).toHaveLength(2);
  expect(provider.verdicts('chat')).toEqual([expect.stringMatching(/maximum context length/), null]);
  expect(calls[0].body.toString()).toBe(body);
  // Parsed once, and only once the upstream had answered the client's own bytes.
  expect(gatewayParses).toEqual([1]);

  // The same process now remembers a compaction for sk-two; another tenant's request is still not read.
  gatewayParses = [];
  const small = chatBody(300);
  expect((await postChat(gateway, small, { authorization: 'Bearer sk-three' })).status).toBe(200);
  expect(gatewayParses).toEqual([]);
});
