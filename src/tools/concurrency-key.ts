import { createHash } from 'node:crypto';
import type { ToolDefinition } from './define.ts';

/**
 * The concurrency key a task of `tool` is stored with, and its limit; undefined when the tool sets none.
 * The key is namespaced by the tool (two tools never share a place) and its value hashed: it comes from
 * the caller's arguments, so it is stored as a fixed-length digest, never as text the caller controls.
 */
export function concurrencyOf(
  tool: ToolDefinition,
  args: unknown,
  principal: string,
): { key: string; limit: number } | undefined {
  const concurrency = tool.concurrency;
  if (concurrency === undefined) return undefined;
  const value = concurrency.key === undefined ? '' : String(concurrency.key(args, { principal }));
  const digest = createHash('sha256').update(value).digest('base64url').slice(0, 22);
  return { key: `${tool.name}/${digest}`, limit: concurrency.limit };
}
