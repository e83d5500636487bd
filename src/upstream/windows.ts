import { LRUCache } from 'lru-cache';
import type { Api } from '../dialects/types.js';
import type { Discoverer, Found, ServerKind } from './discover.js';
import type { Upstream } from './upstreams.js';

/*
 * Per upstream and model, shared by every tenant (a server runs a model with one window, whoever asks):
 *   declared    the config's: the operator's word;
 *   discovered  what the server says (upstream/discover.ts), asked in the background: a request never waits for it;
 *   observed    the prompt count of an answer the server silently cut: at most what it runs with, so it bounds the others.
 * In force: observed when smaller, else declared, else discovered. Discovered and observed windows expire, and one an answer
 * contradicts (a prompt counted larger) is dropped and asked again.
 */

export type WindowSource = 'declared' | 'discovered' | 'observed';

export interface KnownWindow {
  tokens: number;
  /** Whether the window must hold the requested completion too. */
  completionCounted: boolean;
  source: WindowSource;
}

interface ModelState {
  discovered?: Found & { until: number };
  /** No discovery before this time (one in flight, or one that found nothing). */
  askAfter?: number;
  observed?: { tokens: number; until: number };
  /** Bytes per token of this model's requests, from the upstream's own prompt counts. */
  bytesPerToken?: number;
  samples: number;
}

export interface LearnedModel {
  model: string;
  discovered?: { tokens: number; from: string };
  observed?: number;
  bytesPerToken?: number;
}

/** How long a discovered or observed window is believed before it is asked again. */
export const WINDOW_TTL_MS = 10 * 60_000;
/** After a discovery that found nothing: ask again after this long; sooner for a model the server has not loaded yet. */
const NOT_FOUND_RETRY_MS = 60_000;
const NOT_LOADED_RETRY_MS = 1_000;
const KIND_TTL_MS = 60 * 60_000;
/** Each new prompt count moves the calibration this share of the way. */
const CALIBRATION_WEIGHT = 0.5;
const MAX_MODELS = 4096;

export class Windows {
  private readonly models = new LRUCache<string, ModelState>({ max: MAX_MODELS });
  private readonly kinds = new Map<string, { kind: Promise<ServerKind>; until: number }>();
  /** Upstreams for which some model's window is known (a request whose model is not read yet is checked only there). */
  private readonly anyKnown = new Set<string>();

  constructor(
    private readonly discoverer: Pick<Discoverer, 'kindOf' | 'window'> | null,
    private readonly onDiscovered: (upstream: Upstream, model: string, found: Found) => void = () => {},
    private readonly now: () => number = Date.now,
  ) {}

  /** With `ask`, a model with none known (and none asked lately) is asked for in the background, with the request's own `credentials`. */
  windowOf(
    upstream: Upstream,
    api: Api,
    model: string,
    credentials: Record<string, string | string[]>,
    ask = true,
  ): KnownWindow | undefined {
    const declared = upstream.windows.find((w) => w.model.test(model));
    const state = this.models.get(keyOf(upstream, model));
    const now = this.now();
    if (state?.discovered && state.discovered.until <= now) state.discovered = undefined;
    if (state?.observed && state.observed.until <= now) state.observed = undefined;
    if (ask && !declared && !state?.discovered && upstream.discoverWindows && this.discoverer && (state?.askAfter ?? 0) <= now)
      this.discover(upstream, api, model, credentials);
    const base: KnownWindow | undefined = declared
      ? { tokens: declared.tokens, completionCounted: declared.completionCounted, source: 'declared' }
      : state?.discovered
        ? { tokens: state.discovered.tokens, completionCounted: state.discovered.completionCounted, source: 'discovered' }
        : undefined;
    const observed = state?.observed;
    if (observed && (!base || observed.tokens < base.tokens))
      return { tokens: observed.tokens, completionCounted: false, source: 'observed' };
    return base;
  }

  /** Most recently used first, at most `max`; read only (nothing expires or is asked by reading). */
  learned(upstream: Upstream, max: number): LearnedModel[] {
    const prefix = keyOf(upstream, '');
    const now = this.now();
    const out: LearnedModel[] = [];
    for (const [key, state] of this.models.entries()) {
      if (out.length >= max) break;
      if (!key.startsWith(prefix)) continue;
      const discovered = state.discovered && state.discovered.until > now ? state.discovered : undefined;
      const observed = state.observed && state.observed.until > now ? state.observed : undefined;
      if (!discovered && !observed && state.bytesPerToken === undefined) continue;
      out.push({
        model: key.slice(prefix.length),
        ...(discovered ? { discovered: { tokens: discovered.tokens, from: discovered.from } } : {}),
        ...(observed ? { observed: observed.tokens } : {}),
        ...(state.bytesPerToken !== undefined ? { bytesPerToken: state.bytesPerToken } : {}),
      });
    }
    return out;
  }

  knowsAny(upstream: Upstream): boolean {
    return upstream.windows.length > 0 || this.anyKnown.has(upstream.memoryKey);
  }

  bytesPerToken(upstream: Upstream, model: string): number | undefined {
    return this.models.get(keyOf(upstream, model))?.bytesPerToken;
  }

  /** The calibration moves toward `bytes`/`tokens`, and an observed window it passes is dropped (the server took more than that). */
  calibrate(upstream: Upstream, model: string, bytes: number, tokens: number): void {
    if (!(tokens > 0 && bytes > 0)) return;
    const state = this.state(upstream, model);
    const ratio = bytes / tokens;
    state.bytesPerToken =
      state.bytesPerToken === undefined ? ratio : state.bytesPerToken + CALIBRATION_WEIGHT * (ratio - state.bytesPerToken);
    state.samples++;
    if (state.observed && tokens > state.observed.tokens) state.observed = undefined;
    if (state.discovered && tokens > state.discovered.tokens) this.forget(state);
  }

  /** The server cut a request to `tokens`: its window is at most that, until an answer says otherwise. */
  observe(upstream: Upstream, model: string, tokens: number): void {
    const state = this.state(upstream, model);
    state.observed = { tokens: Math.min(tokens, state.observed?.tokens ?? Infinity), until: this.now() + WINDOW_TTL_MS };
    this.anyKnown.add(upstream.memoryKey);
    // What was discovered did not stop the cut: ask again.
    if (state.discovered && state.discovered.tokens > tokens) this.forget(state);
  }

  /** A refusal stated a window of `tokens`: a discovered one that says otherwise is asked again on the next request. */
  contradicted(upstream: Upstream, model: string, tokens: number): void {
    const state = this.models.get(keyOf(upstream, model));
    if (state?.discovered && state.discovered.tokens !== tokens) this.forget(state);
  }

  private forget(state: ModelState): void {
    state.discovered = undefined;
    state.askAfter = 0;
  }

  private state(upstream: Upstream, model: string): ModelState {
    const key = keyOf(upstream, model);
    let state = this.models.get(key);
    if (!state) this.models.set(key, (state = { samples: 0 }));
    return state;
  }

  private discover(upstream: Upstream, api: Api, model: string, credentials: Record<string, string | string[]>): void {
    const state = this.state(upstream, model);
    // One discovery at a time per model: nothing else asks until it ends.
    state.askAfter = Infinity;
    void this.ask(upstream, api, model, credentials).then(
      ({ found, soon }) => {
        const now = this.now();
        if (found) {
          state.discovered = { ...found, until: now + WINDOW_TTL_MS };
          state.askAfter = now + WINDOW_TTL_MS;
          this.anyKnown.add(upstream.memoryKey);
          this.onDiscovered(upstream, model, found);
        } else state.askAfter = now + (soon ? NOT_LOADED_RETRY_MS : NOT_FOUND_RETRY_MS);
      },
      () => (state.askAfter = this.now() + NOT_FOUND_RETRY_MS),
    );
  }

  private async ask(upstream: Upstream, api: Api, model: string, credentials: Record<string, string | string[]>) {
    const discoverer = this.discoverer!;
    let kind = this.kinds.get(upstream.memoryKey);
    if (!kind || kind.until <= this.now()) {
      kind = { kind: discoverer.kindOf(upstream, credentials), until: this.now() + KIND_TTL_MS };
      this.kinds.set(upstream.memoryKey, kind);
    }
    return discoverer.window(await kind.kind, upstream, api, model, credentials);
  }
}

function keyOf(upstream: Upstream, model: string): string {
  return `${upstream.memoryKey}\0${model}`;
}
