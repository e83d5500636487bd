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
  /** The upstream's response: status, headers and the body still to relay (its first bytes in `held`). */
  response: UpstreamAnswer;
  /** What was read before deciding: the whole error body (bounded), a stream's preamble, or a success's first chunk. */
  held: HeldBody;
  verdict: Verdict;
  /**
   * The verdict again, beside the body the answer is to (parsed): text the request supplied and
   * the error echoes never makes one (overlong/echo.ts). The rescue asks before it learns anything.
   */
  judge: (request: unknown) => Verdict;
}

/** Reads a stream's events as the dialect sees them: preamble (hold), output (relay) or failure (judge). */
export type StreamEvents = (event: string | undefined, data: string) => StreamEventKind;

const PASS: Verdict = { overlong: false, rule: 'success' };
/** The most bytes of preamble events held before giving up and relaying (they are a few hundred bytes). */
const PREAMBLE_LIMIT_BYTES = 64 * 1024;

/** How much of an answer may be held before deciding: bytes of a body, time for a stream's preamble. */
export type HoldLimits = Pick<Config['upstream'], 'errorBodyLimitBytes' | 'preambleHoldMs'>;

/**
 * Reads just enough of an answer to classify it, holding those bytes for the relay: an error body
 * up to `errorBodyLimitBytes`; for a stream whose API announces itself before any output
 * (Responses, Messages), every event up to the first that carries output or a failure, for
 * `preambleHoldMs` at most; otherwise a success's first chunk, since a stream (or an aggregator's
 * 200) can carry an overflow error in-band, or with `whole` its body up to `errorBodyLimitBytes`.
 */
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

/** The verdict on the text as it came, and the way to judge it again beside the request it answers. */
function judged(answer: UpstreamAnswer, held: HeldBody, judge: (request?: unknown) => Verdict): InspectedAnswer {
  return { response: answer, held, verdict: judge(), judge };
}

/**
 * Holds whole events while they are preamble; stops at the first output event (nothing decided,
 * everything relayed from there), at a failure (its data is judged), at the end of the stream,
 * past PREAMBLE_LIMIT_BYTES, or after `holdMs`: a stream that only pings (Anthropic's `ping`) may
 * go on for minutes before its first token, and its client should see it start. A failure after
 * that is relayed as it comes; the rescue's chance is given up. Leaves the stream paused.
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
