/**
 * The headers of a Server-Sent Events response: never cached, never buffered by a proxy in front
 * (nginx reads X-Accel-Buffering), so that each event reaches the client as it is written.
 */
export const SSE_HEADERS = {
  'Content-Type': 'text/event-stream',
  'Cache-Control': 'no-cache',
  'X-Accel-Buffering': 'no',
} as const;
