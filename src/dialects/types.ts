/*
 * A dialect is the only code that knows a wire format: it reads a request into wire items plus one neutral `Entry` per item, writes
 * a compacted list back, and says which answers and stream events can carry an overflow. The core never sees an API's field name.
 */

/** The names config, routes, metrics and logs use; everything else about an API is read off its dialect (dialects/index.ts). */
export const APIS = ['chat', 'responses', 'messages', 'gemini'] as const;
export type Api = (typeof APIS)[number];

/** How an API carries a key: OpenAI's Bearer token, Anthropic's x-api-key, or Google's x-goog-api-key. */
export type CredentialStyle = 'bearer' | 'x-api-key' | 'x-goog-api-key';

/** The path prefix an API's clients put after their base URL. */
export type ApiPrefix = '/v1' | '/v1beta';

export interface ApiEndpoint {
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
  path(model: string): string;
  /** The card's field that holds the input window, in tokens. */
  tokens(card: Record<string, unknown>): unknown;
  from: string;
}

/** What the rest of the gateway knows of an API: routes, where other paths go, how a key is sent, error shape, trace names. */
interface ApiDescriptor {
  api: Api;
  title: string;
  prefix: ApiPrefix;
  /** Base URL ends in the prefix (OpenAI's, Anthropic's `…/v1`: paths go on without it) or is the origin (Gemini's). */
  upstreamBaseHoldsPrefix: boolean;
  /** As the ready line lists it: with the prefix (OpenAI's SDKs, Codex) or without, where clients add it (Anthropic's, Google's). */
  clientBaseUrl: { name: string; withPrefix: boolean };
  /** Paths as sent by a client whose base URL lacks the prefix (`/chat/completions`): the 404 says to add it; null if clients add it. */
  missingPrefix: RegExp | null;
  /** The paths that belong to the API (its pass-through family too, `/v1/messages/count_tokens`). */
  paths: RegExp;
  /** The paths the gateway rescues; every other path of the API is passed through. */
  endpoints: readonly ApiEndpoint[];
  credential: CredentialStyle;
  /** The model a pass-through path names, where the API names it in the path (Gemini); else the body names it. */
  pathModel?: (path: string) => string | undefined;
  errorBody(error: ErrorFacts): unknown;
  /** The GenAI semantic conventions' names for a call in this API. */
  telemetry: { operation: string; provider: string; openaiApiType?: string };
  /** The agents of this API known to send their own compaction call, and how each is recognised. */
  agentCompactions: readonly AgentCompaction[];
  /** Where the API's own server says a model's window; null where it has no such call (a list server's `/models` serves all). */
  modelWindow: ModelWindow | null;
}

/** `instruction`: system/developer text (a leading run is kept byte-identical); `opaque`: provider state nobody may read. */
type Role = 'instruction' | 'user' | 'assistant' | 'tool' | 'opaque';

export interface Entry {
  role: Role;
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

export interface Conversation {
  items: unknown[];
  entries: Entry[];
}

/** What a stream event means before anything was relayed. */
export type StreamEventKind = 'preamble' | 'output' | 'failure';

export interface SummarizerWire {
  /** Path under the summarizer's base URL for a model, e.g. `/chat/completions` (Gemini's names the model). */
  path: (model: string) => string;
  body(o: { model: string; instructions: string; transcript: string; maxTokens: number; request: Record<string, unknown> }): unknown;
  text(answer: unknown): string | undefined;
  /** The tokens a successful answer says the call took, when it says. */
  usage(answer: unknown): { input: number; output: number } | undefined;
  credential: CredentialStyle;
  /** Headers the API needs besides credentials, from the request's own when it has them. */
  headers(requestHeaders: Record<string, string | string[]>): Record<string, string>;
  /** `/responses/compact`: items go as they are, opaque state included; the answer is a window of (encrypted) items taking their place. */
  compact?: {
    path: string;
    body(o: { model: string; items: unknown[]; request: Record<string, unknown> }): unknown;
    /** The window to splice in, or undefined when the answer is not one. */
    window(answer: unknown): unknown[] | undefined;
  };
}

/** Anthropic's signed thinking: once compaction changes an earlier position it is stale; the provider refuses it, or drops it on opt-in. */
export interface BoundState {
  count(item: unknown): number;
  /** The item without its bound blocks; null when nothing else is left in it. */
  strip(item: unknown): unknown | null;
  /** Whether the API refuses the request with the stale state of `items[i]` removed (the open tool round with thinking enabled). */
  mustKeep(request: Record<string, unknown>, items: readonly unknown[], i: number): boolean;
  /** Makes the provider drop stale blocks instead of refusing; `added` when the gateway added the opt-in; null when it cannot opt in. */
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
  /** Each tool output replaced by `label` of it (ids and every other field as sent); null when it carries none that can go. */
  mask(item: unknown, label: (output: ToolOutput) => string): unknown | null;
  /** The item that carries a summary, with the given role (the config's, where the API allows it). */
  summaryItem(text: string, role: string): unknown;
  /** Completion tokens the request asks for, and the request with that number lowered (null: cannot). */
  completion(request: Record<string, unknown>): number | undefined;
  withCompletion(request: Record<string, unknown>, tokens: number): Buffer | null;
  /** Wire-level validity of a compacted conversation (alternation, block order); empty when valid. */
  problems(items: unknown[]): string[];
  /** Events before the first that carries output can be held and the answer still changed; null: the first chunk decides (chat). */
  streamEvent: ((event: string | undefined, data: string) => StreamEventKind) | null;
  /** History upstream (Responses' previous_response_id) cannot be compacted here: this is the one replay that can still help, or null. */
  serverSideRescue(request: Record<string, unknown>): Buffer | null;
  summarizer: SummarizerWire;
  overflow: OverflowWords;
  /** Bound provider state the compaction must strip or cover after its edit point; null when the API has none to strip. */
  bound: BoundState | null;
  /** Bound items the upstream says it dropped (`input_transformations`), off the held start of an answer; null: answers never say. */
  droppedState: ((held: string) => number | undefined) | null;
  /** Prompt tokens (cached included) an answer says were read: whole JSON or a stream's events (usage at the end; Messages: the start). */
  promptCount(answer: string): number | undefined;
}
