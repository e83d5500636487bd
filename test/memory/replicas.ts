import { expect } from 'vitest';
import type { ConfigInput } from '../../src/config/schema.js';
import { completion } from '../helpers/fake-upstream.js';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startStandIn, type StandIn } from '../helpers/provider.js';
import { until } from '../helpers/redis.js';
import { parseCompactionHeader } from '../helpers/rescue.js';
import { LIMIT, firstOverflow, sessionRequest } from './session.js';

/*
 * Two replicas of the gateway sharing one Redis (a Cluster, a Sentinel set), in front of one
 * stand-in provider that also summarises, slowly enough that two compactions of one conversation
 * started at once overlap.
 */

export const overflowAt = firstOverflow();

/** What the summarizer takes per call: longer than the time between two replicas' rejections. */
const SUMMARY_MS = 400;

export interface Replicas {
  provider: StandIn;
  a: TestGateway;
  b: TestGateway;
  close(): Promise<void>;
}

export async function startReplicas(memory: ConfigInput['memory']): Promise<Replicas> {
  let made = 0;
  const provider = await startStandIn({
    limitBytes: LIMIT,
    summarizer: async (req) => {
      await new Promise((r) => setTimeout(r, SUMMARY_MS));
      const input = String(req.json?.messages?.at(-1)?.content ?? '');
      // Each call's summary is its own: two summaries of one conversation would differ.
      return {
        status: 200,
        json: completion(`SUMMARY #${++made} of ${input.length} chars: the user asked to fix the build.`, 'chatcmpl-summary'),
      };
    },
  });
  // A summarizer model of its own: one call a compaction (the upstream's own model would be called in chunks that fit its window).
  const config: ConfigInput = {
    upstream: { url: provider.baseUrl },
    summarizer: { maxInputTokens: 500_000, model: 'summarizer-model' },
    memory,
    compaction: { mask: false },
  };
  const a = await startGateway(config);
  const b = await startGateway(config);
  // A replica's client connects in the background, and until it is ready every command is a miss
  // (no offline queue, by design): each replica remembers and recalls once before the tests.
  let warm = 0;
  for (const g of [a, b]) {
    await until('a replica to remember and recall through Redis', 20_000, async () => {
      const tenant = `sk-warm-${++warm}`;
      return (await turn(g, overflowAt, tenant)).status === 200 && (await turn(g, overflowAt + 1, tenant)).memory === 'hit';
    });
  }
  return {
    provider,
    a,
    b,
    close: async () => {
      await a.close();
      await b.close();
      await provider.close();
    },
  };
}

const send = (g: TestGateway, turns: number, tenant: string) => postChat(g, sessionRequest(turns), { authorization: `Bearer ${tenant}` });

/** The summary message a replayed request carries, if any. */
function summaryOf(body: any): string | undefined {
  const text = (body?.messages ?? [])
    .map((m: any) => (typeof m.content === 'string' ? m.content : ''))
    .find((c: string) => c.includes('SUMMARY #'));
  return text;
}

/**
 * The same overflowing turn sent to both replicas at once: exactly one summarizer call, both
 * answered 200, and both replays open with that one summary.
 */
export async function sameTurnAtOnce(r: Replicas, tenant: string): Promise<void> {
  const before = r.provider.summarizerCalls().length;
  const chatBefore = r.provider.calls('chat').length;
  const [x, y] = await Promise.all([send(r.a, overflowAt, tenant), send(r.b, overflowAt, tenant)]);
  expect([x.status, y.status]).toEqual([200, 200]);
  expect(r.provider.summarizerCalls().length - before).toBe(1);
  const headers = [x, y].map((res) => parseCompactionHeader(res.headers.get('x-gateway-compaction')));
  expect(headers.map((h) => h.outcome)).toEqual(['replayed', 'replayed']);
  // One made the summary (a miss), the other waited and reused it (a hit).
  expect(headers.map((h) => h.memory).sort()).toEqual(['hit', 'miss']);
  const replays = r.provider
    .calls('chat')
    .slice(chatBefore)
    .map((c) => summaryOf(c.json))
    .filter(Boolean);
  expect(replays).toHaveLength(2);
  expect(replays[0]).toBe(replays[1]);
}

/** The next turn of a conversation, through a replica: 200 whatever Redis is doing. */
export async function turn(
  g: TestGateway,
  turns: number,
  tenant: string,
): Promise<{ status: number; memory: string | number | undefined }> {
  const res = await send(g, turns, tenant);
  const header = res.headers.get('x-gateway-compaction');
  return { status: res.status, memory: header ? parseCompactionHeader(header).memory : undefined };
}
