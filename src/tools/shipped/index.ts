import type { ToolDefinition } from '../define.ts';
import { analyzeNumbers } from './analyze-numbers.ts';
import { confirmAction } from './confirm-action.ts';
import { echo } from './echo.ts';
import { failWith } from './fail-with.ts';

/** The tools a default server registers. */
export const SHIPPED_TOOLS: readonly ToolDefinition[] = [
  analyzeNumbers,
  confirmAction,
  failWith,
  echo,
] as ToolDefinition[];
