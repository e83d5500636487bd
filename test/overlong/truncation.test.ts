import { describe, expect, it } from 'vitest';
import { promptTokensOf } from '../helpers/strict-ollama.js';
import { sessionTurns } from '../helpers/sessions.js';
import {
  CALIBRATED_MARGIN,
  MIN_MISSING_TOKENS,
  MIN_REPORTED_TOKENS,
  UNCALIBRATED_BYTES_PER_TOKEN,
  blobBytes,
  judgeTruncation,
} from '../../src/overlong/truncation.js';

/*
 * The judgement of a silent cut from an answer's prompt count (src/overlong/truncation.ts): what
 * a server that cuts (Ollama) reports, against what a server that reads the whole request reports.
 */

describe('judgeTruncation', () => {
  it('calibrated: a count more than the margin below the estimate is a cut; within it, not', () => {
    // 4 bytes a token, 100 KB sent: 25,000 tokens expected.
    expect(judgeTruncation({ bytes: 100_000, reported: 25_000, bytesPerToken: 4 })).toEqual({ truncated: false });
    expect(judgeTruncation({ bytes: 100_000, reported: Math.ceil(25_000 * (1 - CALIBRATED_MARGIN)) + 1, bytesPerToken: 4 })).toEqual({
      truncated: false,
    });
    expect(judgeTruncation({ bytes: 100_000, reported: 8_192, bytesPerToken: 4 })).toEqual({
      truncated: true,
      expected: 25_000,
      reported: 8_192,
    });
  });

  it('calibrated: fewer than MIN_MISSING_TOKENS missing is noise, however large the share', () => {
    // 3,000 bytes at 4 a token: 750 expected; 600 reported is 20% short but 150 tokens.
    expect(judgeTruncation({ bytes: 3_000, reported: 600, bytesPerToken: 4 })).toEqual({ truncated: false });
    expect(MIN_MISSING_TOKENS).toBeGreaterThan(150);
  });

  it('uncalibrated: only a count below one token per UNCALIBRATED_BYTES_PER_TOKEN bytes', () => {
    const bytes = 400_000;
    const floor = bytes / UNCALIBRATED_BYTES_PER_TOKEN;
    expect(judgeTruncation({ bytes, reported: floor })).toEqual({ truncated: false });
    // CJK text escaped by an SDK (6 bytes a character) at about 1.3 characters a token: 8 bytes a token, no cut.
    expect(judgeTruncation({ bytes, reported: bytes / 8 })).toEqual({ truncated: false });
    expect(judgeTruncation({ bytes, reported: 4_096 })).toEqual({ truncated: true, expected: floor, reported: 4_096 });
  });

  it('base64 data is not text: an image counted in tiles is no cut', () => {
    // 1 MB of image and 20 KB of text, counted at 5,000 + 1,105 tokens.
    const image = 1_000_000;
    expect(judgeTruncation({ bytes: image + 20_000, reported: 6_105 }).truncated).toBe(true);
    expect(judgeTruncation({ bytes: image + 20_000, reported: 6_105, blobBytes: image })).toEqual({ truncated: false });
    expect(judgeTruncation({ bytes: image + 20_000, reported: 6_105, bytesPerToken: 4, blobBytes: image })).toEqual({ truncated: false });
  });

  it('a count below any window a server runs is never a cut', () => {
    expect(judgeTruncation({ bytes: 1_000_000, reported: MIN_REPORTED_TOKENS - 1, bytesPerToken: 4 })).toEqual({ truncated: false });
    expect(judgeTruncation({ bytes: 1_000_000, reported: 0 })).toEqual({ truncated: false });
    expect(judgeTruncation({ bytes: 1_000_000, reported: Number.NaN })).toEqual({ truncated: false });
  });
});

describe('blobBytes', () => {
  it('counts base64 runs of 1 KiB or more, as data URLs and bare fields carry them', () => {
    const payload = Buffer.alloc(3_000, 7).toString('base64');
    const body = Buffer.from(
      JSON.stringify({
        messages: [
          {
            role: 'user',
            content: [
              { type: 'image_url', image_url: { url: `data:image/png;base64,${payload}` } },
              { type: 'text', text: 'what is this?' },
            ],
          },
        ],
        images: [payload],
      }),
    );
    expect(blobBytes(body)).toBe(2 * payload.length);
  });

  it('prose, code and short tokens are not data', () => {
    const text = 'function main() { return 42; }\n'.repeat(200) + 'A'.repeat(1_000);
    expect(blobBytes(Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: text }] })))).toBe(0);
  });
});

describe('the calibrated margin against real sessions', () => {
  /*
   * How far bytes per token move from one turn of an agent's session to the next: the recorded pi
   * and opencode sessions (their real bodies), counted as the Ollama stand-in counts a prompt (its
   * rendered messages and tools, not the JSON's bytes). A calibration carried from one turn to the
   * next must stay well inside CALIBRATED_MARGIN, or a growing session would look cut.
   */
  it.each(['pi', 'opencode'] as const)('%s: the ratio moves by far less than the margin from turn to turn', (agent) => {
    const ratios = sessionTurns(agent).map((body) => Buffer.byteLength(JSON.stringify(body)) / promptTokensOf(body.messages, body.tools));
    expect(ratios.length).toBeGreaterThan(8);
    const drifts = ratios.slice(1).map((r, i) => Math.abs(r - ratios[i]) / ratios[i]);
    console.log(
      `${agent}: bytes per token ${ratios.map((r) => r.toFixed(2)).join(' ')}; largest turn-to-turn drift ${(Math.max(...drifts) * 100).toFixed(1)}%`,
    );
    expect(Math.max(...drifts)).toBeLessThan(CALIBRATED_MARGIN / 2);
    // And no turn of a whole session, judged with the calibration of the turn before, looks cut.
    for (let i = 1; i < ratios.length; i++) {
      const body = sessionTurns(agent)[i];
      const bytes = Buffer.byteLength(JSON.stringify(body));
      expect(judgeTruncation({ bytes, reported: promptTokensOf(body.messages, body.tools), bytesPerToken: ratios[i - 1] })).toEqual({
        truncated: false,
      });
    }
  });
});
