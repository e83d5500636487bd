import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { messages as dialect } from '../../src/dialects/messages.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { parseCompactionHeader } from '../helpers/rescue.js';
import { countBreakpoints, expectWellFormed, summaryTurn } from '../helpers/anthropic.js';
import type { StrictAnthropic, StrictAnthropicReject } from '../helpers/strict-anthropic.js';
import { startStandIn } from '../helpers/provider.js';

/*
 * The recorded Claude Code 2.1 session (13 requests, 49 KB to 227 KB, stream: true, one Read per
 * turn) replayed turn by turn, with Claude Code's own headers and query, against the strict Anthropic
 * stand-in (the API's checks and errors; it refuses anything over 130 KB). Claude Code resends its whole history every turn; from the 7th
 * request on every turn is over the limit, and every one must be answered.
 */

const dir = new URL('../fixtures/agent-sessions/claude/', import.meta.url);
const recorded = JSON.parse(readFileSync(new URL('headers.json', dir), 'utf8'));
const { host: _h, 'content-length': _l, connection: _c, ...headers } = recorded.headers as Record<string, string>;
const turns = Array.from({ length: 13 }, (_, i) => readFileSync(new URL(`${String(i + 1).padStart(2, '0')}-main.json`, dir)));
const LIMIT = 130_000;

let upstream: StrictAnthropic;
let gateway: TestGateway;
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
});

interface Turn {
  status: number;
  header: string | null;
  calls: number;
  summarizerCalls: number;
}

describe.each<StrictAnthropicReject>(['json_413', 'prompt_too_long'])('the recorded Claude Code session against a %s limit', (style) => {
  it('answers every turn; every turn over the limit is compacted, with the summary a user turn', async () => {
    upstream = await startStandIn({ provider: 'anthropic', style, limitBytes: LIMIT });
    gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
    const log: Turn[] = [];
    for (const [i, body] of turns.entries()) {
      const calls = upstream.messageCalls().length;
      const summaries = upstream.summarizerCalls().length;
      const res = await fetch(`${gateway.origin}${recorded.path}`, {
        method: 'POST',
        headers: { ...headers, 'x-api-key': 'sk-ant-session' },
        body,
      });
      const text = await res.text();
      expect(res.status, `turn ${i + 1}`).toBe(200);
      expect(text, `turn ${i + 1}`).toContain('event: message_stop');
      const sent = upstream.messageCalls().slice(calls);
      log.push({
        status: res.status,
        header: res.headers.get('x-gateway-compaction'),
        calls: sent.length,
        summarizerCalls: upstream.summarizerCalls().length - summaries,
      });
      const last = sent.at(-1)!;
      expect(last.url).toBe('/v1/messages?beta=true');
      expect(last.body.length, `turn ${i + 1} as answered`).toBeLessThanOrEqual(LIMIT);
      if (body.length <= LIMIT) {
        expect(log[i]).toEqual({ status: 200, header: null, calls: 1, summarizerCalls: 0 });
        expect(last.body.equals(body)).toBe(true);
        continue;
      }
      expectCompactedTurn(i + 1, JSON.parse(body.toString('utf8')), last.json, log[i]);
    }
    // The first overflow is refused and replayed; memory sends the later turns compacted ahead.
    const over = log.slice(6);
    expect(parseCompactionHeader(over[0].header).outcome).toBe('replayed');
    expect(over[0].calls).toBe(2);
    for (const turn of over.slice(1))
      expect(parseCompactionHeader(turn.header)).toMatchObject({ outcome: 'compacted', trigger: 'proactive' });
    expect(over.reduce((n, t) => n + t.calls, 0)).toBe(over.length + 1);
    // A remembered summary is reused while the turns fit under it: not one summary per turn.
    expect(over.reduce((n, t) => n + t.summarizerCalls, 0)).toBeLessThanOrEqual(3);
    // The API refused the one overlong attempt and nothing else the gateway sent.
    expect(
      upstream
        .checks()
        .map((c) => c.refused)
        .filter(Boolean),
    ).toHaveLength(1);
  });
});

function expectCompactedTurn(turn: number, original: any, sent: any, record: Turn): void {
  const header = parseCompactionHeader(record.header);
  expect(['replayed', 'compacted'], `turn ${turn}: ${record.header}`).toContain(header.outcome);
  expect(summaryTurn(sent)?.role, `turn ${turn}: the summary's turn`).toBe('user');
  expectWellFormed(sent.messages);
  expect(dialect.problems(sent.messages), `turn ${turn}`).toEqual([]);
  // Claude Code's task, its system entry and its newest read are there as sent.
  expect(sent.messages[1]).toEqual(original.messages[1]);
  expect(sent.messages[0].content.slice(0, original.messages[0].content.length)).toEqual(original.messages[0].content);
  // The newest read is kept; whole, unless the header says kept content was cut (the last resort).
  const newest = original.messages.at(-1).content[0];
  const kept = sent.messages.at(-1).content[0];
  if (header.cut === 0) expect(kept).toEqual(newest);
  else {
    expect(kept.tool_use_id).toBe(newest.tool_use_id);
    expect(kept.content).toContain('characters cut by compaction-gateway');
    expect(kept.content.slice(0, 300)).toBe(newest.content.slice(0, 300));
    expect(kept.content.slice(-300)).toBe(newest.content.slice(-300));
  }
  expect(countBreakpoints(sent)).toBeLessThanOrEqual(countBreakpoints(original));
  const { messages: _a, ...fieldsBefore } = original;
  const { messages: _b, ...fieldsAfter } = sent;
  expect(JSON.stringify(fieldsAfter), `turn ${turn}: every other field as sent`).toBe(JSON.stringify(fieldsBefore));
}
