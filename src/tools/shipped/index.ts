import type { ToolDefinition } from '../define.ts';
import { analyzeNumbers } from './analyze-numbers.ts';
import { approvedExport } from './approved-export.ts';
import { checksumShards } from './checksum-shards.ts';
import { confirmAction } from './confirm-action.ts';
import { echo } from './echo.ts';
import { exportCsv } from './export-csv.ts';
import { failWith } from './fail-with.ts';
import { scanRows } from './scan-rows.ts';

/** The tools a default server registers. */
export const SHIPPED_TOOLS: readonly ToolDefinition[] = [
  analyzeNumbers,
  confirmAction,
  failWith,
  echo,
  approvedExport,
  checksumShards,
  exportCsv,
  scanRows,
] as ToolDefinition[];

/** This module, which sync-call threads load the shipped tools from (as `tools`, like a `--tools` module). */
export const SHIPPED_TOOLS_MODULE = import.meta.url;
export { SHIPPED_TOOLS as tools };
