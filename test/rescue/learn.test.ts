import { describe, expect, it } from 'vitest';
import { chat } from '../../src/dialects/chat.js';
import type { LearnedLimit } from '../../src/memory/limits.js';
import type { RescueContext } from '../../src/rescue/context.js';
import type { Thread, Who } from '../../src/memory/index.js';
import { learnFrom, rememberedFor } from '../../src/rescue/memory.js';
import { readIncoming } from '../../src/rescue/request.js';

/*
 * What one rejection teaches the memory, per tenant and model: a stated window (with whether the
 * error counted the completion, and the size of the request that stated it), a stated body limit,
 * or else the size that was refused. A request with no model or no credential, or a gateway
 * without memory, teaches nothing.
 */

function ctxWith(
  body: unknown,
  learned: Array<[string, LearnedLimit]>,
  memory = true,
  clientHeaders: Record<string, string> = { authorization: 'Bearer sk-a' },
): RescueContext {
  // Every lesson and lookup is the routed upstream's own.
  const own = (upstream: string) => expect(upstream).toBe('upstream-memory-key');
  const fake = {
    learn: async (who: Who, bounds: LearnedLimit) => (own(who.upstream), void learned.push([who.model!, bounds])),
    // As the memory does: a request without a model is believed to meet no learned limit.
    remembered: async (of: Who | Thread) => {
      const who = 'session' in of ? of.who : of;
      own(who.upstream);
      return { entry: null, bounds: who.model ? { limitTokens: who.model.length } : undefined };
    },
    thread: (who: Who, items: unknown[], fixedEnd: number) => ({ who, session: 's', items, fixedEnd }),
    countLookup: () => {},
  };
  return {
    deps: { memory: memory ? fake : null, config: { memory: { shareAnonymous: false } } },
    upstream: { name: 'default', memoryKey: 'upstream-memory-key' },
    dialect: chat,
    path: '/v1/chat/completions',
    incoming: readIncoming(Buffer.from(JSON.stringify(body)), undefined),
    clientHeaders,
  } as unknown as RescueContext;
}

const overlong = (reason: 'context_length' | 'body_too_large', limits: Record<string, unknown>) =>
  ({ overlong: true, reason, limits, rule: 'test' }) as never;

describe('learnFrom', () => {
  it('a stated window and a stated completion; never the prompt\u2019s bytes per token (that is the conversation\u2019s)', async () => {
    const learned: Array<[string, LearnedLimit]> = [];
    await learnFrom(
      ctxWith({ model: 'm1' }, learned),
      overlong('context_length', { limitTokens: 8000, promptTokens: 9000, completionTokens: 500 }),
      36_000,
    );
    expect(learned).toEqual([['m1', { limitTokens: 8000, completionCounted: true, windowFrom: 36_000 }]]);
  });

  it('a window whose error did not count the completion, and states no prompt size', async () => {
    const learned: Array<[string, LearnedLimit]> = [];
    await learnFrom(ctxWith({ model: 'm1' }, learned), overlong('context_length', { limitTokens: 8000 }), 36_000);
    expect(learned).toEqual([['m1', { limitTokens: 8000, completionCounted: false, windowFrom: 36_000 }]]);
  });

  it('an error that says it counted the completion without stating it', async () => {
    const learned: Array<[string, LearnedLimit]> = [];
    await learnFrom(ctxWith({ model: 'm1' }, learned), overlong('context_length', { limitTokens: 8000, completionCounted: true }), 36_000);
    expect(learned[0][1]).toEqual({ limitTokens: 8000, completionCounted: true, windowFrom: 36_000 });
  });

  it('a stated body limit on a 413', async () => {
    const learned: Array<[string, LearnedLimit]> = [];
    await learnFrom(ctxWith({ model: 'm2' }, learned), overlong('body_too_large', { limitBytes: 1_048_576 }), 2_000_000);
    expect(learned).toEqual([['m2', { limitBytes: 1_048_576, bodyLimitFrom: 2_000_000 }]]);
  });

  it('no number stated: the refused size is the bound, for either reason', async () => {
    const learned: Array<[string, LearnedLimit]> = [];
    await learnFrom(ctxWith({ model: 'm3' }, learned), overlong('body_too_large', {}), 2_000_000);
    await learnFrom(ctxWith({ model: 'm3' }, learned), overlong('context_length', { promptTokens: 100 }), 50_000);
    expect(learned).toEqual([
      ['m3', { refusedBytes: 2_000_000 }],
      ['m3', { refusedBytes: 50_000 }],
    ]);
  });

  it('a number of the other kind is not taken: a byte limit on a context error, a window on a 413', async () => {
    const learned: Array<[string, LearnedLimit]> = [];
    await learnFrom(ctxWith({ model: 'm4' }, learned), overlong('context_length', { limitBytes: 1000 }), 5000);
    await learnFrom(ctxWith({ model: 'm4' }, learned), overlong('body_too_large', { limitTokens: 1000, promptTokens: 10 }), 6000);
    expect(learned).toEqual([
      ['m4', { refusedBytes: 5000 }],
      ['m4', { refusedBytes: 6000 }],
    ]);
  });

  it('nothing to learn from an empty refusal, a request with no model or no credential, a verdict the echo check undid, or without memory', async () => {
    const learned: Array<[string, LearnedLimit]> = [];
    await learnFrom(ctxWith({ model: 'm5' }, learned), overlong('body_too_large', {}), 0);
    await learnFrom(ctxWith({ messages: [] }, learned), overlong('context_length', { limitTokens: 8000 }), 9000);
    await learnFrom(ctxWith({ model: 'm5' }, learned, false), overlong('context_length', { limitTokens: 8000 }), 9000);
    await learnFrom(ctxWith({ model: 'm5' }, learned, true, {}), overlong('context_length', { limitTokens: 8000 }), 9000);
    await learnFrom(ctxWith({ model: 'm5' }, learned), { overlong: false, rule: 'schema' }, 9000);
    expect(learned).toEqual([]);
  });
});

describe('rememberedFor', () => {
  it('asks the memory for the request’s model; nothing without memory or a model', async () => {
    expect((await rememberedFor(ctxWith({ model: 'abc' }, []), null)).bounds).toEqual({ limitTokens: 3 });
    expect((await rememberedFor(ctxWith({ messages: [] }, []), null)).bounds).toBeUndefined();
    expect((await rememberedFor(ctxWith({ model: 'abc' }, [], false), null)).bounds).toBeUndefined();
  });

  it('recalls nothing without memory', async () => {
    const ctx = ctxWith({ model: 'abc', messages: [{ role: 'user', content: 'x' }] }, [], false);
    const conversation = chat.read(ctx.incoming.json!);
    expect(conversation).not.toBeNull();
    expect(await rememberedFor(ctx, conversation)).toEqual({ entry: null, bounds: undefined });
  });
});
