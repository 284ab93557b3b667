/**
 * The floor for the 2025-11-25 (session) path: the official `@modelcontextprotocol/sdk` 1.x `McpServer` on
 * its stateful `StreamableHTTPServerTransport`, as the SDK's README and examples wire it: `initialize`
 * creates a transport (randomUUID session ids) and connects a fresh `McpServer` to it; later requests are
 * routed by `mcp-session-id` to the transport kept in a Map, in memory. Default SSE responses (no
 * `enableJsonResponse`), on a plain node:http server. The same tools as ours (names, descriptions, input
 * schemas: tools/list carries the same descriptions), of which only `echo` is called.
 *   node --import tsx bench/sdk1-server.ts   (env: PORT)
 * Started by bench/run.ts (the sessions scenario); never part of src/.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { z } from 'zod';
import { SHIPPED_TOOLS } from '../src/tools/shipped/index.ts';

function mcpServer(): McpServer {
  const server = new McpServer({ name: 'sdk1-floor', version: '1.0.0' });
  for (const tool of SHIPPED_TOOLS) {
    const shape = (tool.inputSchema as z.ZodObject).shape;
    server.registerTool(
      tool.name,
      { title: tool.title, description: tool.description, inputSchema: shape },
      async (args: Record<string, unknown>) => ({
        content: [{ type: 'text', text: tool.name === 'echo' ? String(args.text) : tool.name }],
      }),
    );
  }
  return server;
}

const transports = new Map<string, StreamableHTTPServerTransport>();

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return chunks.length === 0 ? undefined : JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

function rpcError(res: ServerResponse, status: number, code: number, message: string): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (req.url !== '/mcp') return rpcError(res, 404, -32000, 'Not found');
  const sessionId = req.headers['mcp-session-id'];
  const known = typeof sessionId === 'string' ? transports.get(sessionId) : undefined;
  const body = req.method === 'POST' ? await readJson(req) : undefined;
  if (known !== undefined) return known.handleRequest(req, res, body);
  if (sessionId !== undefined) return rpcError(res, 404, -32001, 'Session not found');
  if (req.method !== 'POST' || !isInitializeRequest(body)) {
    return rpcError(res, 400, -32000, 'Bad Request: No valid session ID provided');
  }
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: (id) => void transports.set(id, transport),
  });
  transport.onclose = () => {
    if (transport.sessionId !== undefined) transports.delete(transport.sessionId);
  };
  await mcpServer().connect(transport);
  await transport.handleRequest(req, res, body);
}

const http = createServer((req, res) => {
  handle(req, res).catch((err: unknown) => {
    console.error(err);
    if (!res.headersSent) rpcError(res, 500, -32603, 'Internal error');
  });
});
http.listen(Number(process.env.PORT), '127.0.0.1', () => process.stdout.write('ready\n'));
process.on('SIGTERM', () => {
  for (const t of transports.values()) void t.close();
  http.close(() => process.exit(0));
  http.closeAllConnections();
});
