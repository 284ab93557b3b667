// A request must arrive whole within REQUEST_TIMEOUT_MS (issue #22: authenticated slow-body connections
// stayed open past 100 s), while a response may stream for as long as it needs. Real sockets.
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { hashToken } from '../../src/http/auth/static-tokens.ts';
import { listen } from '../helpers/mcp.ts';
import { useTestServer } from '../helpers/server-process.ts';

const TOKEN = 'slow-client-token';
const server = useTestServer({
  env: {
    REQUEST_TIMEOUT_MS: '1500',
    SSE_KEEPALIVE_MS: '200',
    AUTH_MODE: 'bearer',
    AUTH_TOKENS: `slow=${hashToken(TOKEN)}`,
  },
});

/** Sends a POST's headers and `sent` bytes of a body that declares 1,000, then nothing: what comes back, and after how long the socket closed. */
function slowBody(url: string, sent: number): Promise<{ reply: string; closedAfterMs: number }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = connect(Number(port), hostname, () => {
      socket.write(
        `POST /mcp HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${TOKEN}\r\n` +
          `Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n` +
          `Content-Length: 1000\r\n\r\n${'{'.repeat(sent)}`,
      );
    });
    let reply = '';
    socket.on('data', (d: Buffer) => (reply += d.toString()));
    socket.on('error', reject);
    socket.on('close', () => resolve({ reply, closedAfterMs: Date.now() - started }));
    // Far past the bound: the server, not this, must have closed it.
    setTimeout(
      () => socket.destroy(new Error('the server kept a stalled request open for 60 s')),
      60_000,
    ).unref();
  });
}

describe('REQUEST_TIMEOUT_MS', () => {
  it('answers a body that stalls with 408 and closes its connection; the process keeps serving', async () => {
    const stalled = await slowBody(server.rt.url, 10);
    expect(stalled.reply).toMatch(/^HTTP\/1\.1 408/);
    // (Node's own default would hold it for 300 s.)
    expect(stalled.closedAfterMs).toBeLessThan(30_000);
    const ok = await server.mcp.request('tools/list', {}, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(ok.status).toBe(200);
  }, 70_000);

  it('does not cut a response that streams longer than it', async () => {
    const stream = await listen(
      server.rt.url,
      { toolsListChanged: true },
      {
        headers: { authorization: `Bearer ${TOKEN}` },
      },
    );
    try {
      expect(stream.status).toBe(200);
      // Twice the bound, then the stream still carries its keep-alives.
      await new Promise((r) => setTimeout(r, 3_000));
      const before = stream.comments;
      const ended = await Promise.race([
        stream.ended.then(() => true),
        new Promise((r) => setTimeout(() => r(false), 1_000)),
      ]);
      expect(ended).toBe(false);
      expect(stream.comments).toBeGreaterThan(before);
    } finally {
      stream.close();
    }
  }, 20_000);
});
