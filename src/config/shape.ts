import { z } from 'zod';
import { configSchema } from './schema.js';

/** How a text (an environment variable, a `${VAR}` in the file) is read for a key. */
export type ValueKind = 'string' | 'int' | 'number' | 'list' | 'bool';

/** The schema of the key at `path` (array items by index), defaults and optionals unwrapped. */
export function schemaAt(path: readonly PropertyKey[]): z.ZodType | undefined {
  let node: z.ZodType | undefined = bare(configSchema);
  for (const key of path) {
    if (node instanceof z.ZodObject) node = (node.shape as Record<PropertyKey, z.ZodType>)[key];
    else if (node instanceof z.ZodArray) node = node.element as z.ZodType;
    // A mapping of names (upstreams): every name holds the same shape.
    else if (node instanceof z.ZodRecord) node = node.valueType as z.ZodType;
    else return undefined;
    if (!node) return undefined;
    node = bare(node);
  }
  return node;
}

export function keysAt(path: readonly PropertyKey[]): string[] {
  const node = schemaAt(path);
  return node instanceof z.ZodObject ? Object.keys(node.shape) : [];
}

export function allKeyPaths(path: string[] = []): string[][] {
  return keysAt(path).flatMap((key) => [[...path, key], ...allKeyPaths([...path, key])]);
}

/** What the key at `path` takes; undefined for a mapping or no key at all. */
export function kindAt(path: readonly PropertyKey[]): ValueKind | undefined {
  const node = schemaAt(path);
  if (node === undefined || node instanceof z.ZodObject) return undefined;
  if (node instanceof z.ZodNumber) return 'number';
  if (node instanceof z.ZodBoolean) return 'bool';
  if (node instanceof z.ZodArray) return 'list';
  return 'string';
}

function bare(node: z.ZodType): z.ZodType {
  let inner = node;
  while (inner instanceof z.ZodDefault || inner instanceof z.ZodOptional) inner = inner.unwrap() as z.ZodType;
  return inner;
}
