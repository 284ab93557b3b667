import { describe, expect, it } from 'vitest';
import { createServerEvents } from '../../src/events/server-events.ts';
import { openRev2025Session, openSessionGet } from '../helpers/rev2025-session.ts';
import { useTestServer } from '../helpers/server-process.ts';
import type { SseStream } from '../helpers/sse.ts';
import { waitFor } from '../helpers/wait.ts';

const server = useTestServer();

/** The SSE ids of a stream's events so far. */
const idsOf = (stream: SseStream) => stream.events.map((e) => e.id);

describe('2025-11-25 SSE event ids', () => {
  it("count the session's own events only, and resume its stream", async () => {
    const { rt } = server;
    const events = createServerEvents(rt.db);
    const mine = await openSessionGet(rt.url, await openRev2025Session(rt.url));
    const others: SseStream[] = [];
    for (let i = 0; i < 5; i++) others.push(await openSessionGet(rt.url, await openRev2025Session(rt.url)));
    const open = [mine, ...others];
    try {
      // Each list change is an event on each of the six streams: the cluster's traffic, six at a time.
      for (let n = 1; n <= 3; n++) {
        await events.listChanged('tools');
        await waitFor(() => open.every((s) => s.messages.length === n), {
          what: `list change ${n} everywhere`,
        });
      }
      const ids = idsOf(mine).map(Number);
      // 1, 2, 3: what this session got, nothing of the other five sessions' 15 events.
      expect(ids).toEqual([ids[0], ids[0]! + 1, ids[0]! + 2]);
      for (const other of others) expect(idsOf(other).map(Number)).toEqual(ids);

      // Last-Event-ID resumes from the session's own numbering: the two events after the first.
      const sessionId = mine.response.headers.get('mcp-session-id')!;
      const resumed = await openSessionGet(rt.url, sessionId, String(ids[0]));
      try {
        await waitFor(() => resumed.messages.length === 2, { what: 'the two later events replayed' });
        expect(idsOf(resumed).map(Number)).toEqual(ids.slice(1));
      } finally {
        resumed.close();
      }
    } finally {
      for (const s of open) s.close();
    }
  });
});
