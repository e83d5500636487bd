/*
 * What the rescue core knows of a conversation, whatever API it came in. A dialect is the only
 * code that knows a wire format: it reads a request into wire items plus one neutral `Entry` per
 * item, writes a compacted list of items back into the request, and says which answers and
 * stream events can carry an overflow. The planner, memory, size target and report see only
 * entries and opaque items, never a field name of any API.
 */

/**
 * Every API the gateway serves, by the names config, routes, metrics and logs use; each has one
 * dialect (dialects/index.ts), and everything else about it is read off that dialect's descriptor.
 */
export const APIS = ['chat', 'responses', 'messages', 'gemini'] as const;
export type Api = (typeof APIS)[number];

/** How an API carries a key: OpenAI's Bearer token, Anthropic's x-api-key, or Google's x-goog-api-key. */
export type CredentialStyle = 'bearer' | 'x-api-key' | 'x-goog-api-key';

/** The path prefix an API's clients put after their base URL. */
export type ApiPrefix = '/v1' | '/v1beta';

/** A path the gateway rescues requests on. */
export interface ApiEndpoint {
  /** The route, in fastify's syntax. */
  path: string;
  /** The route as metrics name it, where the path is a pattern (`{model}` for a model parameter). */
  label?: string;
  /** The path under the upstream base URL, e.g. `/chat/completions`; from the route's parameters where the path names the model. */
  upstreamPath: string | ((params: Record<string, string>) => string);
  /** The model the path names (Gemini), from the route's parameters. */
  model?: (params: Record<string, string>) => string;
}

/** A gateway error as the API's clients read their provider's: status, catalogue type and code, text. */
export interface ErrorFacts {
  status: number;
  type: string;
  code: string;
  message: string;
  param: string | null;
}

/** How one agent marks its own compaction call (dialects/agents.ts). */
export interface AgentCompaction {
  agent: string;
  /** By the request's headers, or by its parsed body when that is at hand (null: not parsed). */
  is(headers: Readonly<Record<string, string | string[] | undefined>>, json: Record<string, unknown> | null): boolean;
}

/** Where the API's own server says a model's context window (upstream/discover.ts). */
interface ModelWindow {
  /** The model's card, under the API's prefix. */
  path(model: string): string;
  /** The card's field that holds the input window, in tokens. */
  tokens(card: Record<string, unknown>): unknown;
  /** The call, as the log line names it. */
  from: string;
}

/**
 * What the rest of the gateway knows of an API, all of it here: its routes, where its other
 * paths go, how a key is sent, how its errors look and how traces name its calls.
 */
interface ApiDescriptor {
  api: Api;
  /** How the API is named to a person. */
  title: string;
  prefix: ApiPrefix;
  /**
   * Whether an upstream's base URL for the API ends in the prefix (OpenAI's and Anthropic's
   * `…/v1`: a path goes on after the base with the prefix taken off), or is the origin the prefix
   * goes on after (Gemini's). APIs that share a prefix agree.
   */
  upstreamBaseHoldsPrefix: boolean;
  /**
   * The base URL the API's SDKs and agents are given, as the ready line lists it: under `name`, and
   * with the prefix (OpenAI's SDKs and Codex) or without it, when they add it themselves (Anthropic's, Google's).
   */
  clientBaseUrl: { name: string; withPrefix: boolean };
  /**
   * The API's paths as a client whose base URL lacks the prefix sends them (`/chat/completions`):
   * the 404 says to add it. Null: its clients add the prefix themselves.
   */
  missingPrefix: RegExp | null;
  /** The paths that belong to the API (its pass-through family too, `/v1/messages/count_tokens`). */
  paths: RegExp;
  /** The paths the gateway rescues; every other path of the API is passed through. */
  endpoints: readonly ApiEndpoint[];
  /** How the gateway's own upstream key is sent. */
  credential: CredentialStyle;
  /** The model a pass-through path names, where the API names it in the path (Gemini); else the body names it. */
  pathModel?: (path: string) => string | undefined;
  /** A gateway error in the shape the API's clients parse. */
  errorBody(error: ErrorFacts): unknown;
  /** The GenAI semantic conventions' names for a call in this API. */
  telemetry: { operation: string; provider: string; openaiApiType?: string };
  /** The agents of this API known to send their own compaction call, and how each is recognised. */
  agentCompactions: readonly AgentCompaction[];
  /** Where the API's own server says a model's window; null where it has no such call (a list server's `/models` serves all). */
  modelWindow: ModelWindow | null;
}

/**
 * What an item is to compaction. `instruction`: system/developer text (a leading run of them is
 * kept byte-identical); `user`: a person's input; `assistant`: the model's turn; `tool`: tool
 * results; `opaque`: provider state (encrypted reasoning, compaction items) nobody may read.
 */
type Role = 'instruction' | 'user' | 'assistant' | 'tool' | 'opaque';

export interface Entry {
  role: Role;
  /** Tool call ids this item issues. */
  calls: readonly string[];
  /** Tool call ids this item answers: never kept without the item that issued them. */
  answers: readonly string[];
  /** Belongs to the item after it (a reasoning item before its call or message): kept or dropped with it. */
  joinsNext: boolean;
}

/** A piece of an item that compaction may shorten, found by its path inside the item. */
export type Slot =
  | { kind: 'text'; path: readonly (string | number)[]; text: string }
  | { kind: 'image'; path: readonly (string | number)[]; value: unknown; placeholder: (label: string) => unknown };

/** An item as the summarizer and the fallback digest read it. */
export interface Rendered {
  who: string;
  text: string;
  calls: { id: string; name: string; args: string }[];
}

/** A tool output as masking sees it: the call it answers, its text, and its size on the wire. */
export interface ToolOutput {
  id: string;
  text: string;
  bytes: number;
}

/** A request's conversation: the wire array it lives in, and what each element is. */
export interface Conversation {
  items: unknown[];
  entries: Entry[];
}

/** What a stream event means before anything was relayed. */
export type StreamEventKind = 'preamble' | 'output' | 'failure';

/** How a summarizer call is made in one API. */
export interface SummarizerWire {
  /** Path under the summarizer's base URL for a model, e.g. `/chat/completions` (Gemini's names the model). */
  path: (model: string) => string;
  body(o: { model: string; instructions: string; transcript: string; maxTokens: number; request: Record<string, unknown> }): unknown;
  /** The summary text of a successful answer. */
  text(answer: unknown): string | undefined;
  /** The tokens a successful answer says the call took, when it says. */
  usage(answer: unknown): { input: number; output: number } | undefined;
  /** How a configured summarizer key is sent in this API. */
  credential: CredentialStyle;
  /** Headers the API needs besides credentials, from the request's own when it has them. */
  headers(requestHeaders: Record<string, string | string[]>): Record<string, string>;
  /**
   * The provider's own compaction, where the API has one (`/responses/compact`): the items it
   * condenses go as they are, opaque state included, and its answer is a window of items (an
   * encrypted compaction item) that takes their place. Absent where the API has none.
   */
  compact?: {
    path: string;
    body(o: { model: string; items: unknown[]; request: Record<string, unknown> }): unknown;
    /** The window to splice in, or undefined when the answer is not one. */
    window(answer: unknown): unknown[] | undefined;
  };
}

/**
 * Provider state bound to everything before it: Anthropic's signed thinking blocks. Once the
 * compaction changes a position, such state after it is stale: the provider refuses it, or drops
 * it when the request opts in. Only the dialect knows where the state sits and what the opt-in is.
 */
export interface BoundState {
  /** How many bound blocks the item carries (0: none). */
  count(item: unknown): number;
  /** The item without its bound blocks; null when nothing else is left in it. */
  strip(item: unknown): unknown | null;
  /** Whether the API refuses the request with the stale state of `items[i]` removed (the open tool round with thinking enabled). */
  mustKeep(request: Record<string, unknown>, items: readonly unknown[], i: number): boolean;
  /**
   * The request and headers that make the provider drop stale blocks instead of refusing them;
   * `added` when the gateway added the opt-in (the caller's own is forwarded as sent), null when
   * the request cannot opt in.
   */
  optIn(
    request: Record<string, unknown>,
    headers: Record<string, string | string[]>,
  ): { request: Record<string, unknown>; headers: Record<string, string>; added: boolean } | null;
}

/** How the API says "too long": an agent starts its own compaction on these words. */
export interface OverflowWords {
  /** Whether an error body already says "too long" as the API's clients read it. */
  says(body: string): boolean;
  /** The API's own overflow error, with the numbers: the prompt's tokens and the window's. */
  error(prompt: number, limit: number): unknown;
}

export interface Dialect extends ApiDescriptor {
  /** The request's conversation, or null when it has none the gateway can compact. */
  read(request: Record<string, unknown>): Conversation | null;
  /** The request with its conversation replaced, every other field as sent. */
  write(request: Record<string, unknown>, items: unknown[]): Buffer;
  /** How many messages `write` sends for these items: fewer where the API's neighbouring turns of one role are merged. */
  wireCount(items: readonly unknown[]): number;
  describe(item: unknown): Entry;
  render(item: unknown): Rendered;
  /** What may be shortened in this item; none for items that must stay byte-identical. */
  slots(item: unknown): Slot[];
  /**
   * The item with each tool output it carries replaced by `label` of it (ids and every other
   * field as sent); null when it carries none that can go (or none at all).
   */
  mask(item: unknown, label: (output: ToolOutput) => string): unknown | null;
  /** The item that carries a summary, with the given role (the config's, where the API allows it). */
  summaryItem(text: string, role: string): unknown;
  /** Completion tokens the request asks for, and the request with that number lowered (null: cannot). */
  completion(request: Record<string, unknown>): number | undefined;
  withCompletion(request: Record<string, unknown>, tokens: number): Buffer | null;
  /** Wire-level validity of a compacted conversation (alternation, block order); empty when valid. */
  problems(items: unknown[]): string[];
  /**
   * Stream events before the first one that carries output can be held and the answer still
   * changed. Null: the first chunk decides, as in chat completions.
   */
  streamEvent: ((event: string | undefined, data: string) => StreamEventKind) | null;
  /**
   * A request whose history lives upstream (the Responses API's previous_response_id) cannot be
   * compacted here; this is the one replay that can still help, or null.
   */
  serverSideRescue(request: Record<string, unknown>): Buffer | null;
  summarizer: SummarizerWire;
  overflow: OverflowWords;
  /** Bound provider state the compaction must strip or cover after its edit point; null when the API has none to strip. */
  bound: BoundState | null;
  /**
   * How many bound items the upstream says it dropped (its `input_transformations`), read off the
   * held start of a successful answer: a stream's first events or a whole JSON body. Undefined when
   * it says nothing; null for an API whose answers never say (nothing is held for it).
   */
  droppedState: ((held: string) => number | undefined) | null;
  /**
   * The prompt tokens an answer says the upstream read (cached ones included), from its text: a
   * whole JSON body, or a stream's events (its usage, at the end; Messages says it at the start).
   * Undefined when the text says none.
   */
  promptCount(answer: string): number | undefined;
}
