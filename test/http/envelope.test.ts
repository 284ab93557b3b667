import { describe, expect, it } from 'vitest';
import { countTasks } from '../helpers/db.ts';
import { mcpHeaders, PROTOCOL_VERSION, TASK_CAPS } from '../helpers/mcp.ts';
import { useTestServer } from '../helpers/server-process.ts';

const server = useTestServer({ env: { MAX_BODY_BYTES: '20000' } });

const META = {
  'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION,
  'io.modelcontextprotocol/clientCapabilities': {},
};
const HEADERS = mcpHeaders('server/discover');
const discoverBody = (params: Record<string, unknown> = { _meta: META }, id: unknown = 7) =>
  JSON.stringify({ jsonrpc: '2.0', id, method: 'server/discover', params });

describe('the Streamable HTTP endpoint (2026-07-28, stateless)', () => {
  it('answers server/discover with versions, capabilities, serverInfo and caching hints', async () => {
    const result = await server.mcp.result('server/discover', {}, { caps: {} });
    expect(result).toMatchObject({
      resultType: 'complete',
      supportedVersions: ['2026-07-28'],
      capabilities: { tools: {}, extensions: { 'io.modelcontextprotocol/tasks': {} } },
      cacheScope: 'public',
      _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'durable-mcp-tasks' } },
    });
    expect(result.ttlMs).toBeGreaterThanOrEqual(0);
  });

  it.each(['GET', 'DELETE'])('rejects %s with 405', async (method) => {
    const reply = await server.mcp.post('', {}, method);
    expect(reply.status).toBe(405);
  });

  it('accepts a notification with 202 and no body', async () => {
    const reply = await server.mcp.post(
      JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } }),
      HEADERS,
    );
    expect(reply.status).toBe(202);
    expect(reply.text).toBe('');
  });

  it('rejects a body that is not JSON with 400 and -32700', async () => {
    const reply = await server.mcp.post('{"jsonrpc": "2.0", "id": 1, ', HEADERS);
    expect(reply.status).toBe(400);
    expect(reply.body).toMatchObject({ jsonrpc: '2.0', error: { code: -32700 } });
    expect(reply.body).not.toHaveProperty('id');
  });

  it.each([
    ['a batch', '[' + discoverBody() + ']'],
    ['a non-object', '42'],
    ['a wrong jsonrpc version', JSON.stringify({ jsonrpc: '1.0', id: 1, method: 'server/discover' })],
    ['a method that is not a string', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 5 })],
    [
      'a null id',
      JSON.stringify({ jsonrpc: '2.0', id: null, method: 'server/discover', params: { _meta: META } }),
    ],
    ['a response', JSON.stringify({ jsonrpc: '2.0', id: 1, result: {} })],
  ])('rejects %s with 400 and -32600', async (_what, body) => {
    const reply = await server.mcp.post(body, HEADERS);
    expect(reply.status).toBe(400);
    expect(reply.body.error.code).toBe(-32600);
  });

  it.each([
    ['no _meta', {}],
    ['no protocol version', { _meta: { 'io.modelcontextprotocol/clientCapabilities': {} } }],
    ['no client capabilities', { _meta: { 'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION } }],
    [
      'capabilities of the wrong type',
      { _meta: { ...META, 'io.modelcontextprotocol/clientCapabilities': 'all' } },
    ],
    [
      'a protocol version of the wrong type',
      { _meta: { ...META, 'io.modelcontextprotocol/protocolVersion': 20260728 } },
    ],
  ])('rejects a request with %s: 400 and -32602, id echoed', async (_what, params) => {
    const reply = await server.mcp.post(discoverBody(params, 'req-9'), HEADERS);
    expect(reply.status).toBe(400);
    expect(reply.body).toMatchObject({ id: 'req-9', error: { code: -32602 } });
  });

  it('accepts a request without clientInfo', async () => {
    const reply = await server.mcp.post(discoverBody(), HEADERS);
    expect(reply.status).toBe(200);
    expect(reply.body.result.resultType).toBe('complete');
  });

  it('rejects an unsupported protocol version with 400, -32022 and the supported versions', async () => {
    const error = await server.mcp.error(
      'server/discover',
      {},
      {
        meta: { 'io.modelcontextprotocol/protocolVersion': '1999-01-01' },
        headers: { 'mcp-protocol-version': '1999-01-01' },
      },
    );
    expect(error).toMatchObject({
      status: 400,
      code: -32022,
      data: { supported: ['2026-07-28'], requested: '1999-01-01' },
    });
  });

  describe('routing headers', () => {
    it.each([
      ['MCP-Protocol-Version missing', { 'mcp-protocol-version': undefined }],
      ['MCP-Protocol-Version different from _meta', { 'mcp-protocol-version': '2025-11-25' }],
      ['Mcp-Method missing', { 'mcp-method': undefined }],
      ['Mcp-Method different from the body', { 'mcp-method': 'tools/list' }],
      ['Mcp-Method in another case', { 'mcp-method': 'TOOLS/CALL' }],
      ['Mcp-Name missing', { 'mcp-name': undefined }],
      ['Mcp-Name different from params.name', { 'mcp-name': 'other' }],
      ['Mcp-Name with invalid Base64', { 'mcp-name': '=?base64?***?=' }],
      [
        'Mcp-Name Base64 of another name',
        { 'mcp-name': `=?base64?${Buffer.from('ech0').toString('base64')}?=` },
      ],
    ])('%s → 400 and -32020', async (_what, headers) => {
      const error = await server.mcp.error(
        'tools/call',
        { name: 'echo', arguments: { text: 'x' } },
        { headers },
      );
      expect(error).toMatchObject({ status: 400, code: -32020 });
    });

    it('decodes a Base64 sentinel Mcp-Name before comparing', async () => {
      const result = await server.mcp.callTool(
        'echo',
        { text: 'hi' },
        { headers: { 'mcp-name': `=?base64?${Buffer.from('echo').toString('base64')}?=` } },
      );
      expect(result.content).toEqual([{ type: 'text', text: 'hi' }]);
    });

    it.each(['tasks/get', 'tasks/update', 'tasks/cancel'])(
      '%s needs Mcp-Name equal to params.taskId',
      async (method) => {
        const params = { taskId: 'abc', inputResponses: {} };
        expect(await server.mcp.error(method, params, { headers: { 'mcp-name': undefined } })).toMatchObject({
          status: 400,
          code: -32020,
        });
        expect(await server.mcp.error(method, params, { headers: { 'mcp-name': 'abd' } })).toMatchObject({
          status: 400,
          code: -32020,
        });
      },
    );

    it('ignores Mcp-Session-Id and Last-Event-ID, and mints no session', async () => {
      const reply = await server.mcp.request(
        'server/discover',
        {},
        { headers: { 'mcp-session-id': 'abc', 'last-event-id': '3' } },
      );
      expect(reply.status).toBe(200);
      expect(reply.headers.get('mcp-session-id')).toBeNull();
    });
  });

  it.each([
    'initialize',
    'ping',
    'tasks/result',
    'tasks/list',
    'logging/setLevel',
    'resources/subscribe',
    'no/such',
  ])('answers the unknown method %s with 404 and -32601', async (method) => {
    const error = await server.mcp.error(method, { taskId: 'x' }, { headers: { 'mcp-name': 'x' } });
    expect(error).toMatchObject({ status: 404, code: -32601 });
  });

  it('puts resultType and serverInfo on every result', async () => {
    for (const [method, params] of [
      ['server/discover', {}],
      ['tools/list', {}],
      ['tools/call', { name: 'echo', arguments: { text: 'a' } }],
    ] as const) {
      const result = await server.mcp.result(method, params);
      expect(result.resultType).toBe('complete');
      expect(result._meta['io.modelcontextprotocol/serverInfo']).toEqual({
        name: 'durable-mcp-tasks',
        version: '0.1.0',
      });
    }
  });

  it('rejects a body over the configured limit with 413 and keeps serving', async () => {
    const before = await countTasks(server.tdb.db);
    const reply = await server.mcp.post(
      JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: {
          name: 'analyze_numbers',
          arguments: { count: 5, pad: 'x'.repeat(30_000) },
          _meta: { ...META, 'io.modelcontextprotocol/clientCapabilities': TASK_CAPS },
        },
      }),
      mcpHeaders('tools/call', { name: 'analyze_numbers' }),
    );
    expect(reply.status).toBe(413);
    expect(reply.body.error.code).toBe(-32600);
    expect(await countTasks(server.tdb.db)).toBe(before);
    expect((await server.mcp.result('server/discover')).resultType).toBe('complete');
  });

  it('rejects a foreign Origin with 403 (DNS rebinding) and accepts a loopback one', async () => {
    const evil = await server.mcp.post(discoverBody(), { ...HEADERS, origin: 'http://evil.example.com' });
    expect(evil.status).toBe(403);
    expect(evil.body.error).toBeDefined();
    const local = await server.mcp.post(discoverBody(), { ...HEADERS, origin: 'http://localhost:5173' });
    expect(local.status).toBe(200);
  });
});
