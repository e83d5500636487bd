/**
 * What the provider's own compaction (`summarizer.providerCompaction`, OpenAI's
 * `/responses/compact`) changes against our summary, on the strict Responses stand-in: a
 * Codex-like agent (store: false, encrypted reasoning sent back every turn) runs 20 turns that
 * overflow from the 8th, once each way. Counts the reasoning items the provider dropped (stale
 * after a rewrite), the condensing calls, and the bytes sent upstream. Loopback only, bounded.
 *
 *   npx tsx bench/provider-compaction.ts
 */
import { startGateway } from '../test/helpers/gateway.js';
import { startStandIn } from '../test/helpers/provider.js';

const TURNS = 20;
const LIMIT = 46_000;
const OUTPUT_BYTES = 6_000;

interface Run {
  mode: string;
  answered: number;
  reasoningDropped: number;
  condensingCalls: number;
  upstreamKB: number;
  strategies: string;
}

async function session(providerCompaction: boolean): Promise<Run> {
  let calls = 0;
  const upstream = await startStandIn({
    provider: 'responses',
    limitBytes: LIMIT,
    style: 'context_length',
    reply: () => ({
      call: { call_id: `call_${++calls}`, name: 'exec_command', arguments: JSON.stringify({ cmd: `cat src/module${calls}.ts` }) },
    }),
  });
  const gateway = await startGateway({ upstream: { url: upstream.baseUrl }, summarizer: { providerCompaction }, log: { level: 'silent' } });
  const input: any[] = [
    { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'You are Codex, a coding agent.' }] },
    { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Review every file under src/ one by one.' }] },
  ];
  let answered = 0;
  const strategies = new Map<string, number>();
  try {
    for (let t = 1; t <= TURNS; t++) {
      const res = await fetch(`${gateway.baseUrl}/responses`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer sk-bench' },
        body: JSON.stringify({
          model: 'gpt-6',
          input,
          store: false,
          include: ['reasoning.encrypted_content'],
          tools: [{ type: 'function', name: 'exec_command' }],
        }),
      });
      const answer: any = await res.json();
      if (res.status !== 200) break;
      answered++;
      const strategy = /strategy=(\w+)/.exec(res.headers.get('x-gateway-compaction') ?? '')?.[1];
      if (strategy) strategies.set(strategy, (strategies.get(strategy) ?? 0) + 1);
      input.push(...answer.output);
      const call = answer.output.find((o: any) => o.type === 'function_call');
      input.push({ type: 'function_call_output', call_id: call.call_id, output: 'x'.repeat(OUTPUT_BYTES) });
    }
    return {
      mode: providerCompaction ? 'provider compaction' : 'our summary',
      answered,
      reasoningDropped: upstream.checks().reduce((n, c) => n + c.removed.length, 0),
      condensingCalls: upstream.summarizerCalls().length,
      upstreamKB: Math.round(upstream.responseCalls().reduce((n, r) => n + r.body.length, 0) / 1000),
      strategies: [...strategies].map(([k, v]) => `${k} ${v}`).join(', '),
    };
  } finally {
    await gateway.close();
    await upstream.close();
  }
}

const runs = [await session(false), await session(true)];
console.log('| mode | turns answered | reasoning items dropped | condensing calls | KB sent upstream | strategies |');
console.log('|---|---:|---:|---:|---:|---|');
for (const r of runs)
  console.log(`| ${r.mode} | ${r.answered}/${TURNS} | ${r.reasoningDropped} | ${r.condensingCalls} | ${r.upstreamKB} | ${r.strategies} |`);
