/*
 * The upstream answered but read less than it was sent: Ollama cuts a prompt over its window and answers 200 (oldest messages
 * first, then the middle of a long one), reporting the tokens it kept as the prompt's count. That count is the only sign:
 *   - calibrated: the model's earlier answers counted B bytes a token, which moves under 1% turn to turn (the recorded pi and
 *     opencode sessions: test/overlong/truncation.test.ts); a count CALIBRATED_MARGIN and MIN_MISSING_TOKENS below is a cut;
 *   - uncalibrated: no text tokenises coarser than ~8 bytes a token, JSON escapes up to 12 (`\u4e2d` is 6 bytes of one character).
 * Base64 data is counted in tiles or pages, not bytes: left out first (blobBytes).
 */

/** A count this share below the calibrated estimate is a cut. */
export const CALIBRATED_MARGIN = 0.15;
/** And at least this many tokens missing: small requests' counts wobble by a template's tokens. */
export const MIN_MISSING_TOKENS = 256;
/** With no calibration: a request counted at more bytes a token than this was cut. */
export const UNCALIBRATED_BYTES_PER_TOKEN = 16;
/** No server runs an agent's model with a smaller window (Ollama's smallest default is 2,048, llama.cpp's 4,096). */
export const MIN_REPORTED_TOKENS = 512;
/** Base64 runs at least this long are data, not text. */
const BLOB_RUN = 1024;

export interface TruncationCheck {
  bytes: number;
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
