import { describe, expect, it } from 'vitest';
import { scanJson } from '../../src/lib/json-shape.js';
import { defaultRescueBudget, rescueCost } from '../../src/rescue/budget.js';
import { MAX_PIECE_TOKENS, MAX_RESCUED_ITEMS, PARSED_AT_ONCE_BYTES, readIncoming } from '../../src/rescue/request.js';
import { agentConversationBody, wideObjectBody } from '../helpers/hostile-bodies.js';

/*
 * What reading a body for a rescue costs is known before it is parsed: a body whose one piece
 * (a field, a message) would hold the event loop for seconds in JSON.parse, or whose conversation
 * is too long to compact, is never parsed; nothing parses a big body outside the rescue's sliced,
 * budgeted read.
 */

/** A body whose `metadata` piece is written with 3 tokens a key and 2 more (its own key and `:`, `{`, and a `,` less). */
const metadataOf = (keys: number) => wideObjectBody(keys, 0);

describe('reading a body for a rescue', () => {
  it(`a piece of more than ${MAX_PIECE_TOKENS} tokens is not parsed: no JSON, too many items`, async () => {
    const over = readIncoming(metadataOf(Math.ceil(MAX_PIECE_TOKENS / 3)), undefined);
    expect(await over.load()).toBeNull();
    expect(over.tooManyItems).toBe(true);
    const under = readIncoming(metadataOf(Math.floor((MAX_PIECE_TOKENS - 2) / 3)), undefined);
    expect(await under.load()).toMatchObject({ model: 'm0', messages: [{ role: 'user', content: 'go' }] });
    expect(under.tooManyItems).toBe(false);
  });

  it(`a conversation of more than ${MAX_RESCUED_ITEMS} items is not rescued either`, async () => {
    const turns = (n: number) =>
      Buffer.from(`{"model":"m","messages":[${'{"role":"user","content":"x"},'.repeat(n - 1)}{"role":"user","content":"x"}]}`);
    const over = readIncoming(turns(MAX_RESCUED_ITEMS + 1), undefined);
    expect(await over.load()).toBeNull();
    expect(over.tooManyItems).toBe(true);
    const at = readIncoming(turns(MAX_RESCUED_ITEMS), undefined);
    expect(((await at.load())?.messages as unknown[]).length).toBe(MAX_RESCUED_ITEMS);
  });

  it(`a body over ${PARSED_AT_ONCE_BYTES} bytes is parsed only by the rescue's read, never at once`, async () => {
    const big = agentConversationBody(PARSED_AT_ONCE_BYTES + 1, 10, 0);
    expect(big.length).toBeGreaterThan(PARSED_AT_ONCE_BYTES);
    const incoming = readIncoming(big, undefined);
    expect(incoming.json).toBeNull();
    const loaded = await incoming.load();
    expect(loaded).toMatchObject({ model: 'gpt-test' });
    expect(incoming.json).toBe(loaded);
    const small = agentConversationBody(PARSED_AT_ONCE_BYTES / 2, 10, 0);
    expect(small.length).toBeLessThanOrEqual(PARSED_AT_ONCE_BYTES);
    expect(readIncoming(small, undefined).json).toMatchObject({ model: 'gpt-test' });
  });
});

describe('the estimate of what a rescue holds', () => {
  const heap384 = 432 * 2 ** 20;
  const cost = async (body: Buffer) => rescueCost(await scanJson([body]));

  it('an agent conversation of 20 MB fits the sidecar budget twice over; one of 53 MB fits it alone', async () => {
    const twenty = await cost(agentConversationBody(20 * 2 ** 20, 2_000, 0));
    expect(2 * twenty).toBeLessThanOrEqual(defaultRescueBudget(heap384));
    const fiftyThree = await cost(agentConversationBody(53 * 2 ** 20, 2_000, 0));
    expect(fiftyThree).toBeLessThanOrEqual(defaultRescueBudget(heap384));
    expect(2 * fiftyThree).toBeGreaterThan(defaultRescueBudget(heap384));
  });
});
