import { createParser } from 'eventsource-parser';
import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type { StreamEventKind } from '../dialects/types.js';
import { classifyResponse, classifyStreamEvent, mayCarryVerdict, type Verdict } from '../overlong/classify.js';
import { fromUpstreamFailure } from '../errors.js';
import { decodeText, firstChunk, holdBody, type HeldBody } from './body.js';
import type { UpstreamAnswer } from './client.js';

export interface InspectedAnswer {
  answer: UpstreamAnswer;
  /** What was read before deciding: the whole error body (bounded), a stream's preamble, or a success's first chunk. */
  held: HeldBody;
  verdict: Verdict;
}

/** Reads a stream's events as the dialect sees them: preamble (hold), output (relay) or failure (judge). */
export type StreamEvents = (event: string | undefined, data: string) => StreamEventKind;

const PASS: Verdict = { overlong: false, rule: 'success' };
/** The most bytes of preamble events held before giving up and relaying (they are a few hundred bytes). */
export const PREAMBLE_LIMIT_BYTES = 64 * 1024;

/**
 * Reads just enough of an answer to classify it, holding those bytes for the relay: an error body
 * up to `errorBodyLimit`; for a stream whose API announces itself before any output (Responses,
 * Messages), every event up to the first that carries output or a failure; otherwise a success's
 * first chunk, since a stream (or an aggregator's 200) can carry an overflow error in-band, or
 * with `whole` its body up to `errorBodyLimit`.
 */
export async function inspect(answer: UpstreamAnswer, errorBodyLimit: number, events: StreamEvents | null = null, whole = false): Promise<InspectedAnswer> {
  const contentType = header(answer.headers['content-type']);
  const encoding = answer.headers['content-encoding'];
  if (answer.status >= 400) {
    const held = await holdBody(answer.body, errorBodyLimit);
    const body = decodeText(held.bytes, encoding);
    return { answer, held, verdict: classifyResponse({ status: answer.status, contentType, body }) };
  }
  if (events && encoding === undefined && contentType?.includes('text/event-stream')) {
    const { held, failure } = await holdPreamble(answer.body, events);
    return { answer, held, verdict: failure === undefined ? PASS : classifyStreamEvent(failure) };
  }
  // A JSON answer to a rewritten request is held whole (bounded): what it says of the input comes at its end.
  const held = whole && contentType?.includes('json') ? await holdBody(answer.body, errorBodyLimit) : await firstChunk(answer.body);
  if (!mayCarryError(held.bytes, encoding)) return { answer, held, verdict: PASS };
  const text = decodeText(held.bytes, encoding);
  const verdict = contentType?.includes('text/event-stream')
    ? classifyStreamEvent(text)
    : classifyResponse({ status: answer.status, contentType, body: text });
  return { answer, held, verdict };
}

/**
 * Holds whole events while they are preamble; stops at the first output event (nothing decided,
 * everything relayed from there), at a failure (its data is judged), at the end of the stream,
 * or past PREAMBLE_LIMIT_BYTES. Leaves the stream paused.
 */
function holdPreamble(body: Readable, events: StreamEvents): Promise<{ held: HeldBody; failure?: string }> {
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
      body.off('data', onData).off('end', onEnd).off('error', onError);
      reject(fromUpstreamFailure(err));
    };
    body.on('data', onData).on('end', onEnd).on('error', onError);
  });
}

function mayCarryError(bytes: Buffer, encoding: string | string[] | undefined): boolean {
  // Compressed bytes cannot be searched; decoding a first chunk is cheap enough.
  return encoding !== undefined || mayCarryVerdict(bytes);
}

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
