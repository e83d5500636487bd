import { describe, expect, it } from 'vitest';
import { chainDigests, itemDigest, sessionKey, tenantOf } from '../../src/memory/fingerprint.js';
import { LocalStore, type MemoryEntry } from '../../src/memory/store.js';

describe('fingerprints', () => {
  it('ignore key order and prompt-cache hints, not content', () => {
    const a = { role: 'user', content: [{ type: 'text', text: 'hi', cache_control: { type: 'ephemeral' } }] };
    const b = { content: [{ text: 'hi', type: 'text' }], role: 'user' };
    expect(itemDigest(a)).toBe(itemDigest(b));
    expect(itemDigest({ role: 'user', content: 'hi' })).not.toBe(itemDigest({ role: 'user', content: 'hi ' }));
    expect(itemDigest({ role: 'user', content: 'hi' })).not.toBe(itemDigest({ role: 'assistant', content: 'hi' }));
  });

  it('chain digests identify a whole prefix, and only that prefix', () => {
    const m = [1, 2, 3, 4].map((i) => ({ role: 'user', content: `m${i}` }));
    const chain = chainDigests(m, 0, 4);
    expect(chain).toHaveLength(4);
    expect(chainDigests(m.slice(0, 2), 0, 2)).toEqual(chain.slice(0, 2));
    const changed = [...m];
    changed[0] = { role: 'user', content: 'other' };
    expect(chainDigests(changed, 0, 4)[3]).not.toBe(chain[3]);
  });

  it('tenants are hashes of the credential, never the credential', () => {
    const a = tenantOf({ authorization: 'Bearer sk-AAAA' });
    const b = tenantOf({ authorization: 'Bearer sk-BBBB' });
    expect(a).not.toBe(b);
    expect(a).not.toContain('sk-AAAA');
    expect(tenantOf({ 'api-key': 'azure-key' })).not.toBe(tenantOf({}));
    const msgs = [{ role: 'system', content: 's' }, { role: 'user', content: 'task' }];
    expect(sessionKey(a, 'u', 'chat', msgs, 2)).not.toBe(sessionKey(b, 'u', 'chat', msgs, 2));
    // the same conversation in another API is another session
    expect(sessionKey(a, 'u', 'chat', msgs, 2)).not.toBe(sessionKey(a, 'u', 'responses', msgs, 2));
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

  it('learned bounds only tighten', async () => {
    const store = new LocalStore(1_000_000, 60);
    await store.learn('m', { refusedBytes: 102_733 });
    await store.learn('m', { refusedBytes: 150_000, limitTokens: 37_000 });
    await store.learn('m', { refusedBytes: 92_100 });
    expect(await store.limit('m')).toEqual({ refusedBytes: 92_100, limitTokens: 37_000 });
  });

  it('remembers which tenants have compactions', async () => {
    const store = new LocalStore(1_000_000, 60);
    expect(await store.hasTenant('t1')).toBe(false);
    await store.markTenant('t1');
    expect(await store.hasTenant('t1')).toBe(true);
    expect(await store.hasTenant('t2')).toBe(false);
  });

  it('says when no tenant can be remembered, so requests skip hashing their credential', async () => {
    const store = new LocalStore(1_000_000, 60);
    expect(store.mayHaveTenants()).toBe(false);
    await store.markTenant('t1');
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
