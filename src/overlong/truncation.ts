/*
 * A silent truncation: the upstream answered, but read less than it was sent. Ollama cuts a
 * prompt longer than its window and answers 200 (the oldest messages first, the task among them;
 * then the middle of one long message), and reports the tokens it kept as the prompt's count. The
 * only sign is that count: below what the request must have had.
 *
 * What a request must have had is estimated from its bytes:
 *
 *   - calibrated: this model's earlier answers counted its requests at B bytes a token. From one
 *     turn to the next of an agent's session that ratio moves by under 1% (the recorded pi and
 *     opencode sessions, counted as Ollama renders them: test/overlong/truncation.test.ts); a
 *     count more than CALIBRATED_MARGIN below the estimate, and by at least MIN_MISSING_TOKENS,
 *     is a cut;
 *   - uncalibrated: no text tokenises coarser than about 8 bytes a token, JSON escapes (a `\u4e2d`
 *     is 6 bytes of one CJK character) make it up to 12; a count of fewer than one token for
 *     every UNCALIBRATED_BYTES_PER_TOKEN bytes is a cut, whatever the model.
 *
 * Base64 data (images, PDFs) is counted by the upstream in tiles or pages, not by its bytes: it is
 * left out of the bytes before either rule (blobBytes).
 */

/** A count this share below the calibrated estimate is a cut. */
export const CALIBRATED_MARGIN = 0.15;
/** And at least this many tokens missing: small requests' counts wobble by a template's tokens. */
export const MIN_MISSING_TOKENS = 256;
/** With no calibration: a request counted at more bytes a token than this was cut. */
export const UNCALIBRATED_BYTES_PER_TOKEN = 16;
/**
 * A count below this is no cut to a window: no server runs an agent's model with a window that
 * small (Ollama's smallest default is 2,048, llama.cpp's 4,096).
 */
export const MIN_REPORTED_TOKENS = 512;
/** Base64 runs at least this long are data, not text. */
const BLOB_RUN = 1024;

export interface TruncationCheck {
  /** Bytes of the request the upstream answered, as sent. */
  bytes: number;
  /** The prompt tokens its answer reports. */
  reported: number;
  /** This model's bytes per token from earlier answers, when any. */
  bytesPerToken?: number;
  /** Bytes of base64 data in the request (blobBytes), when measured. */
  blobBytes?: number;
}

export type Truncation = { truncated: false } | { truncated: true; expected: number; reported: number };

export function judgeTruncation(check: TruncationCheck): Truncation {
  const { reported } = check;
  const text = Math.max(0, check.bytes - (check.blobBytes ?? 0));
  if (!(reported >= MIN_REPORTED_TOKENS)) return { truncated: false };
  if (check.bytesPerToken !== undefined) {
    const expected = Math.round(text / check.bytesPerToken);
    const cut = reported < expected * (1 - CALIBRATED_MARGIN) && expected - reported >= MIN_MISSING_TOKENS;
    return cut ? { truncated: true, expected, reported } : { truncated: false };
  }
  const floor = Math.floor(text / UNCALIBRATED_BYTES_PER_TOKEN);
  return reported < floor && floor - reported >= MIN_MISSING_TOKENS ? { truncated: true, expected: floor, reported } : { truncated: false };
}

/** Bytes of base64 runs of BLOB_RUN characters or more in a JSON body (a data URL's or a `data` field's payload). */
export function blobBytes(body: Buffer): number {
  const text = body.toString('latin1');
  let total = 0;
  for (const match of text.matchAll(BASE64_RUN)) total += match[0].length;
  return total;
}

const BASE64_RUN = new RegExp(`[A-Za-z0-9+/]{${BLOB_RUN},}={0,2}`, 'g');
