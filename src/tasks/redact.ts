// Arguments as an operator may see them: the fields a tool marked secret (`defineTool({ secretArguments })`)
// replaced, wherever the path reaches. The worker and the fork read the stored arguments, never these.

export const REDACTED = '[redacted]';

/**
 * A copy of `args` with every path in `paths` replaced by "[redacted]". A path is dotted field names;
 * `*` stands for every element of an array or every field of an object (`rows.*.token`).
 */
export function redactArguments(args: unknown, paths: readonly string[] | null | undefined): unknown {
  if (paths === null || paths === undefined || paths.length === 0) return args;
  let copy = structuredClone(args);
  for (const path of paths) copy = redactPath(copy, path.split('.'));
  return copy;
}

function redactPath(value: unknown, path: readonly string[]): unknown {
  if (path.length === 0) return value === undefined ? value : REDACTED;
  if (typeof value !== 'object' || value === null) return value;
  const [head, ...rest] = path as [string, ...string[]];
  const record = value as Record<string, unknown>;
  const keys = head === '*' ? Object.keys(record) : Object.hasOwn(record, head) ? [head] : [];
  for (const key of keys) record[key] = redactPath(record[key], rest);
  return value;
}
