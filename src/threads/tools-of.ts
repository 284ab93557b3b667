import type { ToolDefinition } from '../tools/define.ts';

const isTool = (v: unknown): v is ToolDefinition =>
  typeof v === 'object' &&
  v !== null &&
  typeof (v as { name?: unknown }).name === 'string' &&
  typeof (v as { handler?: unknown }).handler === 'function';

/** The tools a module exports, read as `--tools` reads them: `tools`, a default array, or a default object's `tools`. */
export function toolsOf(mod: Record<string, unknown>, url: string): ToolDefinition[] {
  const def = mod.default;
  const found = Array.isArray(def)
    ? def
    : typeof def === 'object' && def !== null && 'tools' in def
      ? def.tools
      : mod.tools;
  if (!Array.isArray(found) || !found.every(isTool)) throw new Error(`${url} exports no tools`);
  return found;
}
