import { writeDerived } from '../lib/json-source.js';

export type Json = Record<string, unknown>;

export function isRecord(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function str(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/** An image carrying its data inline (a data: URL or long base64), not a short link. */
export function hasInlineData(value: unknown, depth = 0): boolean {
  if (typeof value === 'string') return value.startsWith('data:') || value.length > 1024;
  if (!isRecord(value) || depth > 3) return false;
  return Object.values(value).some((v) => hasInlineData(v, depth + 1));
}

/** The texts of a content value: a string, or parts with `text` (other parts as a short marker). */
export function partsText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return content == null ? '' : JSON.stringify(content);
  return content
    .map((part) => {
      if (typeof part === 'string') return part;
      if (!isRecord(part)) return '';
      if (typeof part.text === 'string') return part.text;
      if (typeof part.refusal === 'string') return part.refusal;
      if (typeof part.type === 'string' && /image|audio|file|document/.test(part.type)) return `[${part.type}]`;
      return '';
    })
    .filter(Boolean)
    .join('\n');
}

/** Token counts an answer reports under `at` (its usage object): input and output, when both are numbers. */
export function usageOf(answer: unknown, at: string, input: string, output: string): { input: number; output: number } | undefined {
  const usage = isRecord(answer) && isRecord(answer[at]) ? answer[at] : undefined;
  const i = usage?.[input];
  const o = usage?.[output];
  return typeof i === 'number' && typeof o === 'number' && i >= 0 && o >= 0 ? { input: i, output: o } : undefined;
}

/** Usage comes last in every API's answer; a key inside a string value is escaped (`\"key\"`) and never read. */
export function lastCount(text: string, key: string): number | undefined {
  const quoted = `"${key}"`;
  let at = text.lastIndexOf(quoted);
  while (at >= 0) {
    const value = COUNT_AFTER_KEY.exec(text.slice(at + quoted.length, at + quoted.length + 32));
    if (value) return Number(value[1]);
    at = text.lastIndexOf(quoted, at - 1);
  }
  return undefined;
}

const COUNT_AFTER_KEY = /^\s*:\s*(\d{1,12})(?![\d.])/;

export function wireBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value) ?? '');
}

export function positiveInt(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value > 0 ? value : undefined;
}

/** Serialises `request` with `field` set to `value`, keeping the key order and every other field's bytes as sent. */
export function withField(request: Json, field: string, value: unknown): Buffer {
  return Buffer.from(writeDerived(request, { [field]: value }));
}

/** Credentials and a header the API requires, copied from the rescued request for the summarizer. */
export function pickHeaders(headers: Record<string, string | string[]>, names: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of names) {
    const value = headers[name];
    if (typeof value === 'string') out[name] = value;
  }
  return out;
}

/** From the held start of an answer: a whole JSON body, or the first stream event whose payload carries it (`at` finds it there). */
export function heldTransformations(held: string, at: (payload: Json) => unknown): unknown[] | undefined {
  if (!held.includes('"input_transformations"')) return undefined;
  const payloads = held.trimStart().startsWith('{') ? [held] : dataLines(held);
  for (const text of payloads) {
    let payload: unknown;
    try {
      payload = JSON.parse(text);
    } catch {
      continue;
    }
    const list = isRecord(payload)
      ? Array.isArray(payload.input_transformations)
        ? payload.input_transformations
        : at(payload)
      : undefined;
    if (Array.isArray(list)) return list;
  }
  return undefined;
}

function dataLines(stream: string): string[] {
  return stream
    .split(/\r?\n/)
    .filter((line) => line.startsWith('data:') && line.includes('"input_transformations"'))
    .map((line) => line.slice(5).trim());
}

/** How many entries of a transformations list have every field of `match`. */
export function countEntries(list: unknown[] | undefined, match: Json): number | undefined {
  if (!list) return undefined;
  return list.filter((e) => isRecord(e) && Object.entries(match).every(([k, v]) => e[k] === v)).length;
}

/** A comma-separated header value with `flag` appended once. */
export function withFlag(value: string | string[] | undefined, flag: string): string {
  const flags = (Array.isArray(value) ? value.join(',') : (value ?? ''))
    .split(',')
    .map((f) => f.trim())
    .filter(Boolean);
  return (flags.includes(flag) ? flags : [...flags, flag]).join(',');
}
