import { afterEach, describe, expect, it } from 'vitest';
import { completion } from '../helpers/fake-upstream.js';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startStandIn, type StandIn } from '../helpers/provider.js';
import { parseCompactionHeader } from '../helpers/rescue.js';
import { windowError } from '../helpers/strict-chat.js';
import { firstOverflow, sessionRequest } from '../memory/session.js';

/*
 * The levels an operator alerts on: a WARN only where the upstream refused something. A long
 * session that overflowed once has every later turn sent compacted ahead from memory, and those
 * turns, accepted, are INFO lines; the refusal that started it, a compaction ahead refused all the
 * same, an upstream error passed through are WARN. At debug, each compaction's summary text (what
 * the model got instead of the history) is a line of its own, marked as user content and bounded.
 */

const LIMIT = 60_000;
let provider: StandIn | undefined;
let gateway: TestGateway | undefined;
afterEach(async () => {
  await gateway?.close();
  await provider?.close();
  gateway = provider = undefined;
});

/** A single-user sidecar whose client sends no credential: memory shared all the same, summaries by the summarizer. */
const sessionGateway = (url: string, log: 'info' | 'debug' = 'info', extra: Record<string, unknown> = {}) =>
  startGateway({
    upstream: { url },
    log: { level: log },
    compaction: { mask: false },
    memory: { shareAnonymous: true },
    summarizer: { maxInputTokens: 500_000 },
    ...extra,
  });

const warnings = (g: TestGateway) => g.logLines().filter((l) => l.level >= 40);
/** The decision lines: one per rescue or compaction ahead. */
const decisions = (g: TestGateway) => g.logLines().filter((l) => /: compacted \d+ items into \d+ /.test(l.msg));
const userContent = (g: TestGateway) => g.logLines().filter((l) => l.content === 'user');

describe('a long session', () => {
  it('WARNs once, at the refusal; the turns compacted ahead from memory after it are INFO', async () => {
    provider = await startStandIn({ limitBytes: LIMIT });
    gateway = await sessionGateway(provider.baseUrl);
    const n = firstOverflow(LIMIT);
    const first = await postChat(gateway, sessionRequest(n));
    expect(first.status).toBe(200);
    expect(parseCompactionHeader(first.headers.get('x-gateway-compaction'))).toMatchObject({ outcome: 'replayed', trigger: 'rejected' });
    expect(warnings(gateway).map((l) => l.msg)).toEqual([
      expect.stringMatching(/^upstream rejected the chat request as overlong \(400 context_length, limit stated\): compacted /),
    ]);

    for (let turn = n + 1; turn <= n + 6; turn++) {
      const res = await postChat(gateway, sessionRequest(turn));
      expect(res.status).toBe(200);
      expect(parseCompactionHeader(res.headers.get('x-gateway-compaction'))).toMatchObject({ outcome: 'compacted', trigger: 'proactive' });
    }
    // Every later turn went compacted ahead and was accepted: nothing was refused after the first.
    expect(provider.calls('chat').filter((c) => c.body.length > LIMIT)).toHaveLength(1);
    const ahead = decisions(gateway).filter((l) => l.compaction.trigger === 'proactive');
    expect(ahead).toHaveLength(6);
    for (const line of ahead) {
      expect(line.level).toBe(30);
      expect(line.msg).toMatch(
        /^chat request extends a conversation compacted before \(remembered summary\): compacted \d+ items into \d+ .*, sending it compacted$/,
      );
    }
    expect(warnings(gateway)).toHaveLength(1);
    // At info, no line holds a summary's text.
    expect(userContent(gateway)).toEqual([]);
    expect(gateway.logText()).not.toMatch(/SUMMARY of/);
  });

  it('a compaction ahead the upstream refuses all the same is a WARN, and so is the rescue after it', async () => {
    provider = await startStandIn({ limitBytes: LIMIT });
    gateway = await sessionGateway(provider.baseUrl);
    const n = firstOverflow(LIMIT);
    expect((await postChat(gateway, sessionRequest(n))).status).toBe(200);
    // The window behind the same URL shrinks: what memory proposes is too long now too.
    const before = provider.calls('chat').length;
    provider.script((req) => ({ status: 400, json: windowError(req.body.length, 11_500) }));
    const res = await postChat(gateway, sessionRequest(n + 1));
    expect(res.status).toBe(200);
    const [proposed, replayed] = provider.calls('chat').slice(before);
    expect(proposed.body.length).toBeGreaterThan(11_500);
    expect(replayed.body.length).toBeLessThanOrEqual(11_500);
    const [, ahead, rescue] = warnings(gateway);
    expect(warnings(gateway)).toHaveLength(3);
    expect(ahead.msg).toMatch(
      /^chat request extends a conversation compacted before .*sending it compacted; the upstream refused it as overlong all the same \(400\)$/,
    );
    expect(ahead.compaction).toMatchObject({ trigger: 'proactive' });
    expect(rescue.msg).toMatch(
      /^upstream rejected the chat request as overlong \(400 context_length, limit stated\): compacted .*, replayed once: the upstream answered 200$/,
    );
  });

  it('an upstream error the gateway passes through after a compaction ahead is a WARN', async () => {
    provider = await startStandIn({ limitBytes: LIMIT });
    gateway = await sessionGateway(provider.baseUrl);
    const n = firstOverflow(LIMIT);
    expect((await postChat(gateway, sessionRequest(n))).status).toBe(200);
    expect((await postChat(gateway, sessionRequest(n + 1))).status).toBe(200);
    const before = provider.calls('chat').length;
    provider.script({
      status: 503,
      json: { error: { message: 'The server is overloaded, please try again later.', type: 'server_error', param: null, code: null } },
    });
    const res = await postChat(gateway, sessionRequest(n + 2));
    expect(res.status).toBe(503);
    expect(provider.calls('chat')).toHaveLength(before + 1);
    const ahead = decisions(gateway).filter((l) => l.compaction.trigger === 'proactive');
    expect(ahead.map((l) => l.level)).toEqual([30, 40]);
    expect(ahead[1].msg).toMatch(/sending it compacted; the upstream answered 503, passed through$/);
  });
});

describe('at debug', () => {
  it('each compaction writes the summary the model got instead of the history, marked as user content', async () => {
    provider = await startStandIn({ limitBytes: LIMIT });
    gateway = await sessionGateway(provider.baseUrl, 'debug');
    const n = firstOverflow(LIMIT);
    expect((await postChat(gateway, sessionRequest(n))).status).toBe(200);
    const replayed = provider.calls('chat').at(-1)!;
    const [line] = userContent(gateway);
    expect(line).toMatchObject({ level: 20, content: 'user', api: 'chat', trigger: 'rejected', strategy: 'summarize', memory: 'miss' });
    expect(line.summary).toMatch(/^SUMMARY of \d+ chars: the user asked to fix the build\.$/);
    expect(line.summaryChars).toBe(line.summary.length);
    expect(line).not.toHaveProperty('summaryTruncated');
    expect(line.msg).toMatch(
      /^what the model got instead of \d+ earlier items: the summary \(\d+ chars\); user content, logged at debug only$/,
    );
    // What the line says is what the upstream got in place of the history.
    const summaryMessage = replayed.json.messages.find(
      (m: any) => typeof m.content === 'string' && m.content.startsWith('[compaction-gateway]'),
    );
    expect(summaryMessage.content).toContain(line.summary);

    // A later turn reuses it as it was: one line per compaction, saying so.
    expect((await postChat(gateway, sessionRequest(n + 1))).status).toBe(200);
    expect(userContent(gateway)).toHaveLength(decisions(gateway).length);
    expect(userContent(gateway)[1]).toMatchObject({ content: 'user', trigger: 'proactive', memory: 'hit' });
  });

  it('a summary longer than 16 KB is cut there, its whole length said', async () => {
    const long = Array.from({ length: 3_000 }, (_, i) => `fact ${i}:`).join(' ');
    provider = await startStandIn({ limitBytes: 160_000, summarizer: { status: 200, json: completion(long, 'chatcmpl-summary') } });
    gateway = await sessionGateway(provider.baseUrl, 'debug', { summarizer: { maxInputTokens: 500_000, maxSummaryTokens: 20_000 } });
    const n = firstOverflow(160_000);
    expect((await postChat(gateway, sessionRequest(n))).status).toBe(200);
    const [line] = userContent(gateway);
    expect(line.summaryChars).toBeGreaterThan(16 * 1024);
    expect(line.summary).toHaveLength(16 * 1024);
    expect(line.summaryTruncated).toBe(true);
    expect(long.startsWith(line.summary)).toBe(true);
    expect(line.msg).toMatch(new RegExp(`the summary \\(${line.summaryChars} chars, the first 16384 here\\)`));
  });
});
