import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { parseCompactionHeader } from '../helpers/rescue.js';
import { startStrictResponses, type StrictResponses, type StrictResponsesReject } from '../helpers/strict-responses.js';

/*
 * A Codex-like agent on the official OpenAI SDK (store: false, encrypted reasoning included, the
 * whole history resent every turn) through the gateway, against a stand-in that binds each
 * reasoning item to the history before it and drops a stale one silently, listing it in the
 * answer's input_transformations. A compaction changes the history before the kept reasoning: the
 * gateway keeps each reasoning item with its call (the API refuses a call without it), lets the
 * provider drop the stale ones, and reports how many; items made after the compaction, under a
 * compacted prefix rebuilt byte for byte, are never dropped.
 */

const TURNS = 12;
const LIMIT = 46_000;
const OUTPUT_BYTES = 6_000;

let upstream: StrictResponses;
let gateway: TestGateway;
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
});

let calls = 0;
const nextCall = () => ({ call: { call_id: `call_${++calls}`, name: 'exec_command', arguments: JSON.stringify({ cmd: `cat src/module${calls}.ts` }) } });

class Codex {
  readonly input: any[] = [
    { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'You are Codex, a coding agent.' }] },
    { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Review every file under src/ one by one.' }] },
  ];
  constructor(private readonly stream: boolean) {}

  async turn(baseURL: string): Promise<{ header: Record<string, string | number> | null }> {
    const client = new OpenAI({ baseURL, apiKey: 'sk-codex', maxRetries: 0 });
    const params: any = {
      model: 'gpt-6',
      input: this.input,
      tools: [{ type: 'function', name: 'exec_command', parameters: { type: 'object', properties: { cmd: { type: 'string' } } } }],
      store: false,
      include: ['reasoning.encrypted_content'],
      stream: this.stream,
    };
    const { data, response } = await client.responses.create(params).withResponse();
    let output: any[];
    if (this.stream) {
      output = [];
      for await (const event of data as any) if (event.type === 'response.output_item.done') output.push(event.item);
    } else {
      output = (data as any).output;
    }
    this.input.push(...output);
    const call = output.find((o) => o.type === 'function_call');
    this.input.push({ type: 'function_call_output', call_id: call.call_id, output: `${'x'.repeat(OUTPUT_BYTES)}` });
    const header = response.headers.get('x-gateway-compaction');
    return { header: header ? parseCompactionHeader(header) : null };
  }
}

describe.each<[StrictResponsesReject, boolean]>([
  ['context_length', false],
  ['edge_413', true],
  ['stream_failed', true],
])('refused as %s (stream %s)', (style, stream) => {
  it('a 12-turn session finishes; the stale reasoning of the kept tail is counted as dropped, none made after the compaction', async () => {
    upstream = await startStrictResponses({ limitBytes: LIMIT, style, reply: nextCall });
    gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
    const agent = new Codex(stream);
    const headers: Array<Record<string, string | number> | null> = [];
    for (let t = 1; t <= TURNS; t++) headers.push((await agent.turn(gateway.baseUrl)).header);

    expect(upstream.checks().filter((c) => c.refused !== null && !/context window|Too Large|context_length/i.test(c.refused))).toEqual([]);
    const first = headers.findIndex((h) => h !== null);
    expect(first + 1, 'the first overflowing turn').toBe(8);
    const rescue = headers[first]!;
    expect(rescue).toMatchObject({ outcome: 'replayed' });
    expect(rescue['thinking-stripped'], 'the Responses API strips nothing itself').toBeUndefined();
    // The reasoning items of the kept tail were made before the summary: the provider drops them.
    const droppedThen = upstream.checks().at(-(TURNS - first))!.removed.length;
    expect(rescue['reasoning-dropped']).toBe(droppedThen);
    expect(droppedThen).toBeGreaterThan(0);
    // Under the same compacted prefix (the remembered summary reused as it was) nothing made since is dropped.
    const later = headers.slice(first + 1);
    for (const [k, h] of later.entries()) {
      expect(h).toMatchObject({ outcome: 'compacted', trigger: 'proactive' });
      const reused = h!['summarizer-ms'] === undefined;
      if (reused) expect(h!['reasoning-dropped'], `turn ${first + k + 2}`).toBe(droppedThen);
    }
    const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
    expect(metrics).toMatch(/gateway_bound_blocks_total\{api="responses",action="dropped"\} [1-9]/);
    expect(metrics).toContain('gateway_bound_blocks_total{api="responses",action="stripped"} 0');
  });
});
