import { createHash } from 'node:crypto';
import type { ToolDefinition } from './define.ts';

type KeyFn = ((args: never, ctx: { readonly principal: string }) => string) | undefined;

/**
 * A flow-control key (concurrency, rate limit, debounce) a task of `tool` is stored with: namespaced by
 * the tool (two tools never share a place) and its value hashed: it comes from the caller's arguments, so
 * it is stored as a fixed-length digest, never as text the caller controls.
 */
export function flowKeyOf(tool: ToolDefinition, keyFn: KeyFn, args: unknown, principal: string): string {
  const value =
    keyFn === undefined ? '' : String((keyFn as (a: unknown, c: object) => string)(args, { principal }));
  const digest = createHash('sha256').update(value).digest('base64url').slice(0, 22);
  return `${tool.name}/${digest}`;
}

/** The concurrency key a task of `tool` is stored with, and its limit; undefined when the tool sets none. */
export function concurrencyOf(
  tool: ToolDefinition,
  args: unknown,
  principal: string,
): { key: string; limit: number } | undefined {
  const concurrency = tool.concurrency;
  if (concurrency === undefined) return undefined;
  return { key: flowKeyOf(tool, concurrency.key, args, principal), limit: concurrency.limit };
}

/** The rate key a task of `tool` is stored with, its limit and window; undefined when the tool sets none. */
export function rateLimitOf(
  tool: ToolDefinition,
  args: unknown,
  principal: string,
): { key: string; limit: number; perMs: number } | undefined {
  const rate = tool.rateLimit;
  if (rate === undefined) return undefined;
  return { key: flowKeyOf(tool, rate.key, args, principal), limit: rate.limit, perMs: rate.per };
}

/** The debounce key a task of `tool` is stored with (per principal: see findPendingDebounced), and its wait. */
export function debounceOf(
  tool: ToolDefinition,
  args: unknown,
  principal: string,
): { key: string; ms: number } | undefined {
  const debounce = tool.debounce;
  if (debounce === undefined) return undefined;
  return { key: flowKeyOf(tool, debounce.key, args, principal), ms: debounce.ms };
}
