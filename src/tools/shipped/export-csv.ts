import { setTimeout as delay } from 'node:timers/promises';
import { z } from 'zod';
import { SHA256_META } from '../../core/artifacts.ts';
import { defineTool } from '../define.ts';

/** Rows of the export, about 64 KiB at a time (a stand-in for a database cursor's pages). */
const ROWS_PER_PAGE = 2_000;
const MIB = 1_048_576;

/**
 * The export's CSV, page by page, as a query streaming its rows would produce it: at least `megabytes`
 * MiB (whole rows). The same rows for the same arguments, so a download can be checked against it.
 */
export async function* exportRows(
  megabytes: number,
  { pageDelayMs = 0, signal }: { pageDelayMs?: number; signal?: AbortSignal } = {},
): AsyncGenerator<string> {
  const target = megabytes * MIB;
  let produced = 0;
  let row = 0;
  yield 'id,sku,quantity,price_cents\n';
  produced += 28;
  while (produced < target) {
    let page = '';
    for (let i = 0; i < ROWS_PER_PAGE && produced + page.length < target; i++, row++) {
      page += `${row},SKU-${(row * 7_919) % 1_000_003},${row % 97},${(row * 31) % 100_000}\n`;
    }
    produced += page.length;
    if (pageDelayMs > 0) await delay(pageDelayMs, undefined, { signal });
    yield page;
  }
}

/**
 * A data job whose output is too large for a result: the export streams into an artifact as its rows are
 * produced (never held whole), and the result links to it.
 */
export const exportCsv = defineTool({
  name: 'export_csv',
  title: 'Export a table as CSV',
  description:
    'A data job with a large output: exports about `megabytes` MiB of CSV rows as the artifact export.csv ' +
    '(read it with resources/read, or download it from the link), optionally `pageDelayMs` per 64 KiB page. ' +
    'Always a task.',
  inputSchema: z.object({
    megabytes: z.number().int().min(0).max(10_240).default(10).describe('Size of the export (MiB)'),
    pageDelayMs: z.number().int().min(0).max(60_000).default(0).describe('Time each page of rows takes (ms)'),
  }),
  taskSupport: 'required',
  async handler({ megabytes, pageDelayMs }, ctx) {
    ctx.status(`Exporting ${megabytes} MiB of rows`);
    const link = await ctx.artifact(
      'export.csv',
      exportRows(megabytes, { pageDelayMs, signal: ctx.signal }),
      {
        mimeType: 'text/csv; charset=utf-8',
      },
    );
    return {
      content: [{ type: 'text', text: `Exported ${link.size} bytes to export.csv` }, link],
      structuredContent: { bytes: link.size, sha256: link._meta[SHA256_META] },
    };
  },
});
