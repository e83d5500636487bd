import { createParser } from 'eventsource-parser';
import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type { Config } from '../config/schema.js';
import type { StreamEventKind } from '../dialects/types.js';
import { classifyResponse, classifyStreamEvent, mayCarryVerdict, type Verdict } from '../overlong/classify.js';
import { fromUpstreamFailure } from '../http/errors.js';
import { headerValue } from '../upstream/headers.js';
import { firstChunk, holdBody, textOf, type HeldBody } from '../upstream/body.js';
import type { UpstreamAnswer } from '../upstream/client.js';

export interface InspectedAnswer {
  response: UpstreamAnswer;
  held: HeldBody;
  verdict: Verdict;
  /** Text the request supplied and the error echoes never makes a verdict (overlong/echo.ts). */
  judge: (request: unknown) => Verdict;
}

export type StreamEvents = (event: string | undefined, data: string) => StreamEventKind;

const PASS: Verdict = { overlong: false, rule: 'success' };
/** Preamble events are a few hundred bytes. */
const PREAMBLE_LIMIT_BYTES = 64 * 1024;

export type HoldLimits = Pick<Config['upstream'], 'errorBodyLimitBytes' | 'preambleHoldMs'>;

/** A success's first chunk is read too: a stream (or an aggregator's 200) can carry an overflow error in-band. */
export async function inspect(
  answer: UpstreamAnswer,
  limits: HoldLimits,
  events: StreamEvents | null = null,
  whole = false,
): Promise<InspectedAnswer> {
  const errorBodyLimit = limits.errorBodyLimitBytes;
  const contentType = headerValue(answer.headers['content-type']);
  const encoding = answer.headers['content-encoding'];
  if (answer.status >= 400) {
    const held = await holdBody(answer.body, errorBodyLimit);
    // The bound is on the decoded text too: a compressed body can inflate a thousandfold.
    const body = await textOf(held.bytes, encoding, errorBodyLimit);
    return judged(answer, held, (request) => classifyResponse({ status: answer.status, contentType, body }, request));
  }
  if (events && encoding === undefined && contentType?.includes('text/event-stream')) {
    const { held, failure } = await holdPreamble(answer.body, events, limits.preambleHoldMs);
    return failure === undefined
      ? { response: answer, held, verdict: PASS, judge: () => PASS }
      : judged(answer, held, (request) => classifyStreamEvent(failure, request));
  }
  // A JSON answer to a rewritten request is held whole (bounded): what it says of the input comes at its end.
  const held =
    whole && contentType?.includes('json')
      ? await holdBody(answer.body, errorBodyLimit)
      : await firstChunk(answer.body, Number(answer.headers['content-length']));
  if (!mayCarryError(held.bytes, encoding)) return { response: answer, held, verdict: PASS, judge: () => PASS };
  const text = await textOf(held.bytes, encoding, errorBodyLimit);
  return judged(answer, held, (request) =>
    contentType?.includes('text/event-stream')
      ? classifyStreamEvent(text, request)
      : classifyResponse({ status: answer.status, contentType, body: text }, request),
  );
}

function judged(answer: UpstreamAnswer, held: HeldBody, judge: (request?: unknown) => Verdict): InspectedAnswer {
  return { response: answer, held, verdict: judge(), judge };
}

/**
 * Bounded by `holdMs`: a stream that only pings (Anthropic's `ping`) may go on for minutes before its first
 * token, and its client should see it start. A failure after that is relayed. Leaves the stream paused.
 */
function holdPreamble(body: Readable, events: StreamEvents, holdMs: number): Promise<{ held: HeldBody; failure?: string }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let decided: StreamEventKind | undefined;
    let failure: string | undefined;
    const text = new StringDecoder('utf8');
    const parser = createParser({
      onEvent(event) {
        if (decided !== undefined) return;
        const kind = events(event.event, event.data);
        if (kind === 'preamble') return;
        decided = kind;
        if (kind === 'failure') failure = event.data;
      },
    });
    const done = (complete: boolean) => {
      clearTimeout(timer);
      body.off('data', onData).off('end', onEnd).off('error', onError);
      if (!complete) body.pause();
      resolve({ held: { bytes: chunks.length === 1 ? chunks[0] : Buffer.concat(chunks), complete }, failure });
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      parser.feed(text.write(chunk));
      if (decided !== undefined || size >= PREAMBLE_LIMIT_BYTES) done(false);
    };
    const onEnd = () => done(true);
    const onError = (err: Error) => {
      clearTimeout(timer);
      body.off('data', onData).off('end', onEnd).off('error', onError);
      reject(fromUpstreamFailure(err));
    };
    const timer = setTimeout(() => done(false), holdMs);
    body.on('data', onData).on('end', onEnd).on('error', onError);
  });
}

function mayCarryError(bytes: Buffer, encoding: string | string[] | undefined): boolean {
  // Compressed bytes cannot be searched; decoding a first chunk is cheap enough.
  return encoding !== undefined || mayCarryVerdict(bytes);
}
