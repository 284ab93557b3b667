// What `durable-mcp-tasks call` shows: a status line (a progress bar on a terminal), and the result.
import { DOWNLOAD_URL_META } from '../core/artifacts.ts';
import { formatBytes } from '../core/bytes.ts';
import { isJsonObject } from '../core/wire.ts';
type Json = Record<string, unknown>;

export interface Output {
  status(line: string): void;
  clear(): void;
}

const BAR_WIDTH = 24;

/** A progress bar from a "k/n" in the status message, when there is one. */
export function progressBar(message: string | undefined): string | undefined {
  const m = /(\d+)\s*\/\s*(\d+)/.exec(message ?? '');
  if (m === null) return undefined;
  const [done, total] = [Number(m[1]), Number(m[2])];
  if (total <= 0 || done > total) return undefined;
  const filled = Math.round((done / total) * BAR_WIDTH);
  return `[${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}] ${Math.round((done / total) * 100)}%`;
}

/** On a terminal one line redrawn in place on stderr; otherwise a plain line per change. */
export function createOutput(tty: boolean, stream: NodeJS.WriteStream): Output {
  if (!tty) {
    let last = '';
    return {
      status(line) {
        if (line === last) return;
        last = line;
        stream.write(`${line}\n`);
      },
      clear() {},
    };
  }
  let shown = false;
  return {
    status(line) {
      const width = Math.max(20, (stream.columns || 80) - 1);
      stream.write(`\r\x1b[2K${line.length > width ? `${line.slice(0, width - 1)}…` : line}`);
      shown = true;
    },
    clear() {
      if (shown) stream.write('\r\x1b[2K');
      shown = false;
    },
  };
}

export function describeStatus(
  tool: string,
  task: { status: string; statusMessage?: string },
  started: number,
  tty: boolean,
): string {
  const { status, statusMessage: message } = task;
  const seconds = `${((Date.now() - started) / 1000).toFixed(1)}s`;
  if (!tty) return `${status}${message === undefined ? '' : `: ${message}`}`;
  const bar = status === 'working' ? progressBar(message) : undefined;
  return [tool, bar, status === 'working' ? undefined : status, message, seconds]
    .filter((p) => p !== undefined)
    .join('  ');
}

/**
 * The text of a CallToolResult's content, one block per line: a link as its name, type, size and where to
 * get it (an artifact's download URL); other blocks as JSON.
 */
export function resultText(result: Json): string {
  const content = Array.isArray(result.content) ? result.content.filter(isJsonObject) : [];
  const lines = content.map((block) => {
    if (block.type === 'text' && typeof block.text === 'string') return block.text;
    if (block.type === 'resource_link' && typeof block.uri === 'string') return linkLine(block);
    return JSON.stringify(block);
  });
  if (lines.length === 0 && result.structuredContent !== undefined)
    lines.push(JSON.stringify(result.structuredContent));
  return lines.join('\n');
}

/** `export.csv (text/csv, 2.0 MiB): <download URL, else the URI>`. */
function linkLine(link: Json): string {
  const meta = isJsonObject(link._meta) ? link._meta : {};
  const url = typeof meta[DOWNLOAD_URL_META] === 'string' ? meta[DOWNLOAD_URL_META] : link.uri;
  const about = [
    typeof link.mimeType === 'string' ? link.mimeType : undefined,
    typeof link.size === 'number' ? formatBytes(link.size) : undefined,
  ].filter((p) => p !== undefined);
  const name = typeof link.name === 'string' ? link.name : 'link';
  return `${name}${about.length > 0 ? ` (${about.join(', ')})` : ''}: ${String(url)}`;
}
