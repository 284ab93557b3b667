// What the in-process benchmark programs (task-latency.ts, workflow.ts) share: one 2026-07-28 request at
// a time with the tasks extension declared, and percentiles printed in the one line format run.ts reads.
import { postMcp, TASKS_EXT } from '../../test/helpers/mcp.ts';

/** A client of `url` (sending `headers` too: a bearer token): each call is one request; its result, or a throw with its error. */
export function rpcClient(url: string, headers: Record<string, string> = {}) {
  return async (
    method: string,
    params: Record<string, unknown>,
    name?: string,
  ): Promise<Record<string, any>> => {
    const reply = await postMcp(url, method, params, {
      caps: { extensions: { [TASKS_EXT]: {} } },
      headers: name === undefined ? headers : { ...headers, 'mcp-name': name },
    });
    if (reply.body.result === undefined) throw new Error(JSON.stringify(reply.body.error));
    return reply.body.result as Record<string, any>;
  };
}

export const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

/** `label  p50 x ms  p99 y ms`, with the ratio of the p50s when `base` is given. */
export const percentileLine = (label: string, xs: number[], base?: number[]) =>
  `${label.padEnd(40)} p50 ${pct(xs, 50).toFixed(2).padStart(8)} ms  p99 ${pct(xs, 99).toFixed(2).padStart(8)} ms` +
  (base ? `  (p50 ×${(pct(xs, 50) / pct(base, 50)).toFixed(1)} of baseline)` : '');
