import { describe, expect, it } from 'vitest';
import { agentSessionOf, itemDigest, sessionKey, spanDigests, tenantOf } from '../../src/memory/fingerprint.js';
import { LocalStore, type MemoryEntry } from '../../src/memory/store.js';

describe('fingerprints', () => {
  it('ignore key order and prompt-cache hints, not content', () => {
    const a = { role: 'user', content: [{ type: 'text', text: 'hi', cache_control: { type: 'ephemeral' } }] };
    const b = { content: [{ text: 'hi', type: 'text' }], role: 'user' };
    expect(itemDigest(a)).toBe(itemDigest(b));
    expect(itemDigest({ role: 'user', content: 'hi' })).not.toBe(itemDigest({ role: 'user', content: 'hi ' }));
    expect(itemDigest({ role: 'user', content: 'hi' })).not.toBe(itemDigest({ role: 'assistant', content: 'hi' }));
  });

  it('span digests identify a whole span, and only that span', () => {
    const m = [1, 2, 3, 4].map((i) => ({ role: 'user', content: `m${i}` }));
    const all = spanDigests(m, 0, [1, 2, 3, 4]);
    expect(new Set(all).size).toBe(4);
    // Asked in any order, alone or together, from a longer or a shorter list: the same digest.
    expect(spanDigests(m, 0, [4, 2])).toEqual([all[3], all[1]]);
    expect(spanDigests(m.slice(0, 2), 0, [2])).toEqual([all[1]]);
    expect(spanDigests(m, 0, [5])).toEqual([undefined]);
    expect(spanDigests([{ x: 0 }, ...m], 1, [4])).toEqual([all[3]]);
    const changed = [...m];
    changed[0] = { role: 'user', content: 'other' };
    expect(spanDigests(changed, 0, [4])).not.toEqual([all[3]]);
    expect(spanDigests(changed, 0, [4])).toEqual(spanDigests(changed, 0, [4]));
  });

  it('tenants are hashes of the credential, never the credential', () => {
    const a = tenantOf({ authorization: 'Bearer sk-AAAA' })!;
    const b = tenantOf({ authorization: 'Bearer sk-BBBB' })!;
    expect(a).not.toBe(b);
    expect(a).not.toContain('sk-AAAA');
    expect(tenantOf({ 'api-key': 'azure-key' })).toMatch(/^[0-9a-f]{32}$/);
    const msgs = [
      { role: 'system', content: 's' },
      { role: 'user', content: 'task' },
    ];
    expect(sessionKey(a, 'u', 'chat', 'm', msgs, 2)).not.toBe(sessionKey(b, 'u', 'chat', 'm', msgs, 2));
    // the same conversation in another API, or to another model, is another session
    expect(sessionKey(a, 'u', 'chat', 'm', msgs, 2)).not.toBe(sessionKey(a, 'u', 'responses', 'm', msgs, 2));
    expect(sessionKey(a, 'u', 'chat', 'm', msgs, 2)).not.toBe(sessionKey(a, 'u', 'chat', 'm-1m', msgs, 2));
    expect(sessionKey(a, 'u', 'chat', 'm', msgs, 2)).toBe(sessionKey(a, 'u', 'chat', 'm', msgs, 2));
  });

  it('a tenant from every credential a request carries: each header, a cookie, a key in the query', () => {
    const carried = [
      tenantOf({ authorization: 'Bearer k' }),
      tenantOf({ 'x-api-key': 'k' }),
      tenantOf({ 'api-key': 'k' }),
      tenantOf({ 'x-goog-api-key': 'k' }),
      tenantOf({ cookie: 'session=k' }),
      tenantOf({}, 'alt=sse&key=k'),
      tenantOf({ authorization: 'Bearer k', cookie: 'session=k' }),
    ];
    for (const t of carried) expect(t).toMatch(/^[0-9a-f]{32}$/);
    expect(new Set(carried).size).toBe(carried.length);
    // Another cookie is another tenant; the same credentials are the same one.
    expect(tenantOf({ cookie: 'session=j' })).not.toBe(tenantOf({ cookie: 'session=k' }));
    expect(tenantOf({ cookie: 'session=k' })).toBe(tenantOf({ cookie: 'session=k' }));
  });

  it('a request with no credential is no tenant at all', () => {
    expect(tenantOf({})).toBeNull();
    expect(tenantOf({ 'content-type': 'application/json', 'user-agent': 'x' }, 'alt=sse')).toBeNull();
    expect(tenantOf({ authorization: '', cookie: '' }, 'key=')).toBeNull();
  });
});

describe('the in-process store', () => {
  const entry = (spanLength: number, size = 10): MemoryEntry => ({
    spanLength,
    spanDigest: `d${spanLength}`,
    pinnedOffsets: [],
    summary: { role: 'user', content: 'x'.repeat(size) },
    summaryText: 'x'.repeat(size),
    summarizedCount: spanLength,
    strategy: 'summarize',
    summarizerCalls: 1,
    fitBytes: 1000,
    aimBytes: 600,
    createdAt: 0,
  });

  it('keeps the newest few entries per conversation', async () => {
    const store = new LocalStore(1_000_000, 60);
    for (let i = 1; i <= 6; i++) await store.remember('s', entry(i));
    expect((await store.entries('s')).map((e) => e.spanLength)).toEqual([6, 5, 4, 3]);
  });

  it('is bounded by bytes: old conversations are evicted first', async () => {
    const store = new LocalStore(5_000, 60);
    for (let i = 0; i < 10; i++) await store.remember(`s${i}`, entry(1, 1_000));
    expect(await store.entries('s0')).toEqual([]);
    expect(await store.entries('s9')).toHaveLength(1);
  });

  it('learned bounds only tighten, each stated limit with the size of the request that stated it', async () => {
    const store = new LocalStore(1_000_000, 60);
    await store.learn('m', { refusedBytes: 102_733 });
    await store.learn('m', { refusedBytes: 150_000, limitTokens: 37_000, windowFrom: 150_000 });
    await store.learn('m', { refusedBytes: 92_100 });
    await store.learn('m', { limitTokens: 40_000, windowFrom: 160_000 });
    expect(await store.limit('m')).toEqual({ refusedBytes: 92_100, limitTokens: 37_000, windowFrom: 150_000 });
  });

  it('a replaced limit is what is known; an empty one forgets', async () => {
    const store = new LocalStore(1_000_000, 60);
    await store.learn('m', { refusedBytes: 102_733, limitTokens: 40 });
    await store.replaceLimit('m', { refusedBytes: 102_733 });
    expect(await store.limit('m')).toEqual({ refusedBytes: 102_733 });
    await store.replaceLimit('m', {});
    expect(await store.limit('m')).toBeUndefined();
  });

  it('keeps each tenant\u2019s reach: the smallest request a remembered span or a learned limit could concern', async () => {
    const store = new LocalStore(1_000_000, 60);
    expect(await store.reachOf('t1')).toBeUndefined();
    await store.markTenant('t1', { disproving: 16_001 });
    expect(await store.reachOf('t1')).toEqual({ extending: Infinity, disproving: 16_001 });
    await store.markTenant('t1', { extending: 9_000, disproving: 20_000 });
    expect(await store.reachOf('t1')).toEqual({ extending: 9_000, disproving: 16_001 });
    expect(await store.reachOf('t2')).toBeUndefined();
  });

  it('says when no tenant can be remembered, so requests skip hashing their credential', async () => {
    const store = new LocalStore(1_000_000, 60);
    expect(store.mayHaveTenants()).toBe(false);
    await store.markTenant('t1', { extending: 100 });
    expect(store.mayHaveTenants()).toBe(true);
    await store.close();
    expect(store.mayHaveTenants()).toBe(false);
  });

  it('forgets after its TTL', async () => {
    const store = new LocalStore(1_000_000, 1);
    await store.remember('s', entry(1));
    await store.learn('m', { limitTokens: 100 });
    expect(await store.entries('s')).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 1_100));
    expect(await store.entries('s')).toEqual([]);
    expect(await store.limit('m')).toBeUndefined();
  });
});

describe("an agent's own session id", () => {
  const msgs = [
    { role: 'system', content: 'You are a coding agent. Today is Monday.' },
    { role: 'user', content: 'fix the test' },
    { role: 'assistant', content: 'ok' },
  ];
  const changed = [{ role: 'system', content: 'You are a coding agent. Today is Tuesday.' }, ...msgs.slice(1)];

  it('keys the conversation by it: its prefix may change under it, and two sessions with one prefix stay apart', () => {
    expect(sessionKey('t', 'u', 'messages', 'm', msgs, 2, 'claude-code:a')).toBe(
      sessionKey('t', 'u', 'messages', 'm', changed, 2, 'claude-code:a'),
    );
    expect(sessionKey('t', 'u', 'messages', 'm', msgs, 2, 'claude-code:a')).not.toBe(
      sessionKey('t', 'u', 'messages', 'm', msgs, 2, 'claude-code:b'),
    );
    // Without one, the kept prefix is the conversation's key.
    expect(sessionKey('t', 'u', 'messages', 'm', msgs, 2)).not.toBe(sessionKey('t', 'u', 'messages', 'm', changed, 2));
    // Still the tenant's, upstream's, API's and model's own.
    expect(sessionKey('t', 'u', 'messages', 'm', msgs, 2, 'x')).not.toBe(sessionKey('t2', 'u', 'messages', 'm', msgs, 2, 'x'));
  });

  it('is read from Codex window ids first, then Claude Code session ids; a value that is no id is none', () => {
    expect(agentSessionOf({ 'x-codex-window-id': 'abc-1:0', 'x-claude-code-session-id': 'x' })).toBe('codex-window:abc-1:0');
    expect(agentSessionOf({ 'x-claude-code-session-id': '90fe242b-1471-4762-9e81-18afee8f1136' })).toBe(
      'claude-code:90fe242b-1471-4762-9e81-18afee8f1136',
    );
    expect(agentSessionOf({ 'x-claude-code-session-id': 'a b' })).toBeUndefined();
    expect(agentSessionOf({ 'x-claude-code-session-id': 'x'.repeat(201) })).toBeUndefined();
    expect(agentSessionOf({ 'session-id': 'abc' })).toBeUndefined();
  });
});
