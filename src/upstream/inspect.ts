import { classifyResponse, classifyStreamEvent, type Verdict } from '../overlong/classify.js';
import { decodeText, firstChunk, holdBody, type HeldBody } from './body.js';
import type { UpstreamAnswer } from './client.js';

export interface InspectedAnswer {
  answer: UpstreamAnswer;
  /** What was read before deciding: the whole error body (bounded), or a success's first chunk. */
  held: HeldBody;
  verdict: Verdict;
}

const PASS: Verdict = { overlong: false, rule: 'success' };
const ERROR_MARK = Buffer.from('error');

/**
 * Reads just enough of an answer to classify it, holding those bytes for the relay:
 * an error body up to `errorBodyLimit`; for a success, its first chunk, since a stream (or an
 * aggregator's 200) can carry an overflow error in-band before any token.
 */
export async function inspect(answer: UpstreamAnswer, errorBodyLimit: number): Promise<InspectedAnswer> {
  const contentType = header(answer.headers['content-type']);
  const encoding = answer.headers['content-encoding'];
  if (answer.status >= 400) {
    const held = await holdBody(answer.body, errorBodyLimit);
    const body = decodeText(held.bytes, encoding);
    return { answer, held, verdict: classifyResponse({ status: answer.status, contentType, body }) };
  }
  const held = await firstChunk(answer.body);
  if (!mayCarryError(held.bytes, encoding)) return { answer, held, verdict: PASS };
  const text = decodeText(held.bytes, encoding);
  const verdict = contentType?.includes('text/event-stream')
    ? classifyStreamEvent(text)
    : classifyResponse({ status: answer.status, contentType, body: text });
  return { answer, held, verdict };
}

function mayCarryError(bytes: Buffer, encoding: string | string[] | undefined): boolean {
  // Compressed bytes cannot be searched; decoding a first chunk is cheap enough.
  return encoding !== undefined || bytes.includes(ERROR_MARK);
}

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
