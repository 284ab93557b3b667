// What `durable-mcp-tasks call` shows: a status line (a progress bar on a terminal), the task's events
// as lines, and the result.
import type { TaskEvent } from '../client/index.ts';
import { DOWNLOAD_URL_META } from '../core/artifacts.ts';
import { formatBytes } from '../core/bytes.ts';
import { SERVER_EVENTS } from '../core/task-events.ts';
import { isJsonObject } from '../core/wire.ts';
type Json = Record<string, unknown>;

export interface Output {
  /** The status line (stderr): redrawn in place on a terminal, else a line per change. */
  status(line: string): void;
  clear(): void;
  /** A line of the task's output (stdout), above the status line when both share a terminal. */
  print(line: string): void;
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

/**
 * On a terminal one line redrawn in place on stderr; otherwise a plain line per change. Output lines go
 * to `stdout`; when it is the same terminal, the status line is cleared for them and drawn again below.
 */
export function createOutput(
  tty: boolean,
  stream: NodeJS.WriteStream,
  stdout: NodeJS.WritableStream & { isTTY?: boolean } = process.stdout,
): Output {
  if (!tty) {
    let last = '';
    return {
      status(line) {
        if (line === last) return;
        last = line;
        stream.write(`${line}\n`);
      },
      clear() {},
      print: (line) => void stdout.write(`${line}\n`),
    };
  }
  let shown: string | undefined;
  const draw = (line: string) => {
    const width = Math.max(20, (stream.columns || 80) - 1);
    stream.write(`\r\x1b[2K${line.length > width ? `${line.slice(0, width - 1)}…` : line}`);
  };
  const clear = () => {
    if (shown !== undefined) stream.write('\r\x1b[2K');
  };
  return {
    status(line) {
      draw(line);
      shown = line;
    },
    clear() {
      clear();
      shown = undefined;
    },
    print(line) {
      if (stdout.isTTY !== true) return void stdout.write(`${line}\n`);
      clear();
      stdout.write(`${line}\n`);
      if (shown !== undefined) draw(shown);
    },
  };
}

/** How wide a compact event line may be when stdout is not a terminal. */
export const PLAIN_EVENT_WIDTH = 200;

/**
 * The lines an event shows as: partial output as its content (text as it is), an artifact as its link,
 * any other event as its type and JSON payload on one line cut to `width` (its type dimmed on a
 * terminal). The final status and a request for input show as nothing: the status line and the
 * questions say them.
 */
export function eventLines(event: TaskEvent, { width, tty }: { width: number; tty: boolean }): string[] {
  if (event.type === SERVER_EVENTS.status || event.type === SERVER_EVENTS.inputRequired) return [];
  if (event.type === SERVER_EVENTS.partial && Array.isArray(event.payload.content)) {
    return event.payload.content.filter(isJsonObject).map(blockLine);
  }
  if (event.type === SERVER_EVENTS.artifact && typeof event.payload.uri === 'string') {
    return [`artifact ${linkLine(event.payload)}`];
  }
  const line = cut(`${event.type} ${JSON.stringify(event.payload)}`, width);
  return [tty ? `\x1b[2m${event.type}\x1b[22m${line.slice(event.type.length)}` : line];
}

const cut = (line: string, width: number) => (line.length > width ? `${line.slice(0, width - 1)}…` : line);

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
  const lines = content.map(blockLine);
  if (lines.length === 0 && result.structuredContent !== undefined)
    lines.push(JSON.stringify(result.structuredContent));
  return lines.join('\n');
}

/** A content block as text: a text block's text, a link's line, anything else as JSON. */
function blockLine(block: Json): string {
  if (block.type === 'text' && typeof block.text === 'string') return block.text;
  if (block.type === 'resource_link' && typeof block.uri === 'string') return linkLine(block);
  return JSON.stringify(block);
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
