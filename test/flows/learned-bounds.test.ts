import { afterEach, expect, it } from 'vitest';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';
import { NGINX_413 } from '../helpers/provider.js';
import { parseCompactionHeader, toolTurnsBody } from '../helpers/rescue.js';

/*
 * What one conversation teaches must not break another of the same model. A provider whose token
 * counts disagree with body sizes by 7x (images, PDFs) states its window with them; a plain-text
 * conversation behind a 413 that states nothing must still be rescued, and its header's figures
 * must be its own.
 */

let upstream: FakeUpstream;
let gateway: TestGateway;
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
});

const EDGE_LIMIT = 40_000;
/** An image-heavy conversation: 31.5 KB of body that the provider counts as 227,255 tokens. */
const imageBody = { model: 'm', messages: [{ role: 'user', content: `IMAGE-CONVERSATION ${'x'.repeat(31_400)}` }] };

function provider(window?: { tokens: number }) {
  return startFakeUpstream((req, res) => {
    if (req.body.includes('IMAGE-CONVERSATION')) {
      return json(res, 400, {
        error: {
          message:
            "This model's maximum context length is 200000 tokens. However, your messages resulted in 227255 tokens. Please reduce the length of the messages.",
          type: 'invalid_request_error',
          param: 'messages',
          code: 'context_length_exceeded',
        },
      });
    }
    if (window && req.body.includes('SMALL-WINDOW')) {
      return json(res, 400, {
        error: {
          message: `This model's maximum context length is ${window.tokens} tokens. However, your messages resulted in ${window.tokens + 1} tokens.`,
          type: 'invalid_request_error',
          param: 'messages',
          code: 'context_length_exceeded',
        },
      });
    }
    if (req.body.length > EDGE_LIMIT) {
      res.writeHead(413, { 'content-type': 'text/html' });
      res.end(NGINX_413);
      return;
    }
    return json(res, 200, completion('rescued answer'));
  });
}

/** A plain-text session whose newest tool result alone is 30 KB: it must stay whole. */
const plainBody = (marker = '') => {
  // The same model as the conversations that taught the bounds.
  return toolTurnsBody(8, (t) => `${marker}contents of src/f${t}.ts\n${'let a = 1;\n'.repeat(t === 7 ? 2_700 : 600)}`, { model: 'm' });
};

it('after a run of rejections with 7x token counts, a plain conversation of the same model behind a 413 is rescued, with its own figures', async () => {
  upstream = await provider();
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
  for (let i = 0; i < 3; i++) expect((await postChat(gateway, imageBody)).status).toBe(400);

  const body = plainBody();
  const bytes = Buffer.byteLength(JSON.stringify(body));
  const res = await postChat(gateway, body);
  expect(res.status).toBe(200);
  expect(res.json.choices[0].message.content).toBe('rescued answer');
  const header = parseCompactionHeader(res.headers.get('x-gateway-compaction'));
  expect(header).toMatchObject({ outcome: 'replayed', reason: 'body_too_large', 'bytes-before': bytes });
  // Its tokens in its own (default) bytes per token, not the image conversation's 0.14.
  expect(header['tokens-before']).toBe(Math.round(bytes / 3));
  const replay = upstream.received.at(-1)!;
  expect(replay.body.length).toBeLessThanOrEqual(EDGE_LIMIT);
  expect(replay.json.messages.at(-1)).toEqual(body.messages.at(-1));
});

it('a window learned from another conversation that leaves this one no plan is not the last word: tried once with what its own rejection says', async () => {
  upstream = await provider({ tokens: 8_000 });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
  // Another conversation teaches an 8,000-token window: at 3 bytes a token, 21.6 KB fit.
  const small = { model: 'm', messages: [{ role: 'user', content: `SMALL-WINDOW ${'y'.repeat(30_000)}` }] };
  expect((await postChat(gateway, small)).status).toBe(400);

  // The person's last input is 30 KB, and never cut: under 21.6 KB there is no plan.
  const body = toolTurnsBody(8, (t) => `contents of src/f${t}.ts\n${'let a = 1;\n'.repeat(600)}`, { model: 'm' });
  body.messages[body.messages.length - 1] = {
    role: 'user',
    content: `Here is the spec:\n${'the parser must accept every input; '.repeat(850)}`,
  };
  const res = await postChat(gateway, body);
  expect(res.status).toBe(200);
  expect(parseCompactionHeader(res.headers.get('x-gateway-compaction'))).toMatchObject({
    outcome: 'replayed',
    reason: 'body_too_large',
    cut: 0,
  });
  expect(upstream.received.at(-1)!.json.messages.at(-1)).toEqual(body.messages.at(-1));
  // One refusal, one replay: the retry with its own numbers costs no extra upstream call.
  const calls = upstream.received.filter((r) => !r.body.includes('SMALL-WINDOW') && r.headers['x-gateway-compaction'] !== 'summarizer');
  expect(calls.map((c) => c.body.length > EDGE_LIMIT)).toEqual([true, false]);
});
