import { rebind, type BoundMemory } from './bound.js';
import type { Condensed } from './condense.js';
import type { CompactionInput } from './input.js';
import { notShrunk, type CompactionFigures, type CompactionResult, type Restrip } from './result.js';
import { freshBound, type NewSpan } from './span.js';
import { validateCompaction } from './validate.js';

/** A compacted list on its way out, and what made it. */
interface Finishing {
  input: CompactionInput;
  figures: CompactionFigures;
  compacted: unknown[];
  /** For each compacted item, the index of the conversation item it is, or null for a new one. */
  origins: readonly (number | null)[];
  summary: Pick<Condensed, 'strategy' | 'calls' | 'tokens' | 'ms' | 'failure' | 'providerFailure'>;
  memory: 'hit' | 'miss';
  cut: number;
  span?: NewSpan;
  isNew?: boolean;
}

/**
 * Validates and writes the compacted list, bound state rebound after the edit point. `span` is
 * what memory keeps of it: a new summary's span (`isNew`) is remembered as such; a reused one only
 * when a refusal changed how its bound state goes.
 */
export function finish({ input, figures, compacted, origins, summary, memory, cut, span, isNew = false }: Finishing): CompactionResult {
  const remembered = span?.bound ?? freshBound(input, cut);
  // A cut item is not rebuilt alike on a later turn: nothing made after this prefix can be fresh.
  const state = cut > 0 ? { ...remembered, freshFrom: Number.MAX_SAFE_INTEGER } : remembered;
  const rebindAs = (m: BoundMemory) =>
    rebind(input.dialect.bound, input.request, input.headers ?? {}, input.conversation.items, compacted, origins, m);
  const rebound = rebindAs(state);
  if (validateCompaction(input.dialect, input.conversation.items, rebound.items).length > 0) return notShrunk(figures, 'invalid_plan');
  const body = input.dialect.write(rebound.request, rebound.items);
  if (body.length >= input.target.fitBytes) return notShrunk(figures, 'cannot_fit');
  const restrip: Restrip = () => {
    if (state.stripAll) return null;
    const all = rebindAs({ ...state, stripAll: true });
    if (all.stripped === rebound.stripped && all.optIn === rebound.optIn) return null;
    const strippedSpan = span && { ...span, bound: { ...span.bound, stripAll: true } };
    return {
      body: input.dialect.write(all.request, all.items),
      headers: all.headers,
      bound: { stripped: all.stripped, optIn: all.optIn },
      span: strippedSpan,
    };
  };
  return {
    ...figures,
    outcome: 'compacted',
    body,
    headers: rebound.headers,
    bound: input.dialect.bound ? { stripped: rebound.stripped, optIn: rebound.optIn } : null,
    restrip,
    strategy: summary.strategy,
    messagesAfter: input.dialect.wireCount(rebound.items),
    bytesAfter: body.length,
    tokensAfter: Math.round(body.length / input.target.bytesPerToken),
    summarizerMs: summary.ms,
    summarizerCalls: summary.calls,
    summarizerTokens: summary.tokens,
    summarizerFailure: summary.failure,
    providerFailure: summary.providerFailure,
    memory,
    cut,
    newSpan: isNew ? span : undefined,
    span,
  };
}
