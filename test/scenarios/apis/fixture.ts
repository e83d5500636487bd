import type { Received } from '../../helpers/fake-upstream.js';
import type { Api, StandIn, TooLong } from '../../helpers/provider.js';
import { parseCompactionHeader } from '../../helpers/compaction-header.js';

/*
 * What the scenario table needs of an API, and nothing more: a new API is one more object of
 * this shape. Bodies are the API's wire JSON; the SDK of the API sends them.
 */

export type Body = Record<string, any>;

export interface Turn {
  status: number;
  /** x-gateway-compaction, parsed; null when absent. */
  header: Record<string, string | number> | null;
  /** The answer's text as the SDK handed it to the agent. */
  text: string;
  /** The answer in the shape the agent keeps in its history (message, items, blocks or parts). */
  answer: unknown;
  /** The provider's own words when the SDK threw an API error. */
  error?: string;
}

export interface ApiFixture {
  api: Api;
  /** The gateway's upstream.url for the stand-in. */
  upstreamUrl(standIn: StandIn): string;
  /**
   * An agent's request: its task, `turns` tool rounds (a call and an output of about 4 KB each),
   * the model's remark and the user's next question; every other field the API takes is set.
   */
  request(turns: number): Body;
  /** The agent's next request: `turn`'s answer appended as it came, then the output of its call. */
  next(body: Body, turn: Turn): Body;
  /** What the gateway's header says of a refusal in `style`, and whether the refusal states the window. */
  reject(style: TooLong): { reason: 'context_length' | 'body_too_large'; statesWindow: boolean };
  /** The stream events before any content (held by the gateway while it may still replay). */
  preamble(): string[];
  /** A preamble event to repeat (padded by `pad` bytes), or null for an API whose streams have no preamble. */
  idleEvent(i: number, pad: number): string | null;
  /** The first content event; its text is CONTENT_TEXT. */
  contentEvent(): string;
  /** An overflow said inside a 200 stream. */
  failureEvent(): string;
  /** One turn through the API's official SDK. */
  send(origin: string, body: Body, o: { stream: boolean; headers?: Record<string, string> }): Promise<Turn>;
  /** A stream through the SDK: the text it handed over (`onContent` called at its first), and what it made of the failure. */
  sdkStream(origin: string, body: Body, onContent: () => void): Promise<{ text: string; failure: string }>;
  /** What the SDK makes of a failure after the content started. */
  sdkFailure: RegExp;
  /** The body as the SDK puts it on the wire (streaming or not). */
  wire(body: Body, stream: boolean): Body;
  /** A wire body by plain fetch to `origin` (the gateway or the stand-in), with the agent's credential. */
  post(origin: string, bytes: Buffer | string, o: { stream: boolean; headers?: Record<string, string> }): Promise<Response>;
  /** A replay the strict provider takes, checked apart from the stand-in: smaller, valid, the rest as sent. */
  expectValidReplay(rejected: Received, replay: Received): void;
  /** Broken tool pairs in a wire body, each named; [] when every call has its output right after it. */
  brokenPairs(body: Body): string[];
}

export const CONTENT_TEXT = 'Reading the next file';
const OUTPUT_BYTES = 4_000;

/** A file the agent's tool read: `bytes` of plausible source. */
export function fileText(n: number, bytes = OUTPUT_BYTES): string {
  const line = `export const value${n} = ${n}; // src/module${n}.ts, one line of the file\n`;
  return line.repeat(Math.ceil(bytes / line.length)).slice(0, bytes);
}

export const TASK = 'Review every TypeScript file under src/ one by one.';
export const REMARK = 'I have read the files so far.';
export const QUESTION = 'Go on with the next file.';

export function headerOf(value: string | null | undefined): Record<string, string | number> | null {
  return value ? parseCompactionHeader(value) : null;
}

/** Reads a stream to its end, or to the cut. */
export async function readAll(res: Response): Promise<{ text: string; cut: boolean }> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return { text, cut: false };
      text += decoder.decode(value, { stream: true });
    }
  } catch {
    return { text, cut: true };
  }
}
