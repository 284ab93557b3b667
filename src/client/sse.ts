import type { JsonObject } from '../core/wire.ts';

/** Reads JSON-RPC messages out of an SSE stream as its text arrives, in pieces of any size. */
export class SseReader {
  #buffer = '';

  /** The messages of the events this text completed. */
  push(text: string): JsonObject[] {
    this.#buffer += text;
    const events = this.#buffer.split(/\r?\n\r?\n/);
    this.#buffer = events.pop() ?? '';
    return events.flatMap(messageOf);
  }

  /** The message of a last event the stream did not end with a blank line. */
  end(): JsonObject[] {
    const rest = this.#buffer;
    this.#buffer = '';
    return messageOf(rest);
  }
}

function messageOf(event: string): JsonObject[] {
  const data = event
    .split(/\r?\n/)
    .filter((line) => line.startsWith('data:'))
    .map((line) => line.slice(5).replace(/^ /, ''))
    .join('\n');
  if (data === '') return [];
  try {
    const parsed: unknown = JSON.parse(data);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)
      ? [parsed as JsonObject]
      : [];
  } catch {
    return [];
  }
}
