// Idempotent create (issue #22): a tools/call retried with the same key gets the task the first call
// created, never a second job; concurrent retries too. Real Postgres, pg-boss and HTTP.
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { META_IDEMPOTENCY_KEY } from '../../src/core/wire.ts';
import { defineTool } from '../../src/tools/define.ts';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';
import { useTestServer } from '../helpers/server-process.ts';

/** One report per id: the tool's own key. */
const report = defineTool({
  name: 'report',
  description: 'one report per id (test tool)',
  inputSchema: z.object({ id: z.string(), format: z.string().default('csv') }),
  taskSupport: 'required',
  idempotencyKey: (args) => args.id,
  handler: ({ id }) => ({ content: [{ type: 'text', text: `report ${id}` }] }),
});

const server = useTestServer({ tools: [...SHIPPED_TOOLS, report] });

const withKey = (key: unknown) => ({ meta: { [META_IDEMPOTENCY_KEY]: key } });

/** How many tasks (and how many first runs' attempts) the database holds for these ids. */
async function stored(taskIds: string[]) {
  const { rows } = await sql<{ tasks: number; attempts: number }>`
    select (select count(*)::int from tasks where task_id = any(${taskIds}::text[])) as tasks,
      (select count(*)::int from task_attempts where task_id = any(${taskIds}::text[])) as attempts`.execute(
    server.rt.db,
  );
  return rows[0]!;
}

describe('an idempotency key in _meta', () => {
  it('returns the first call’s task to a retry, which runs once', async () => {
    const first = await server.mcp.callTool('analyze_numbers', { count: 100 }, withKey('retry-1'));
    const done = await server.mcp.waitForTask(first.taskId as string);
    expect(done.status).toBe('completed');
    const again = await server.mcp.callTool('analyze_numbers', { count: 100 }, withKey('retry-1'));
    expect(again.taskId).toBe(first.taskId);
    expect(again.status).toBe('completed');
    expect(await stored([first.taskId as string])).toEqual({ tasks: 1, attempts: 1 });
    // Without a key, or with another, a new task.
    const other = await server.mcp.callTool('analyze_numbers', { count: 100 }, withKey('retry-2'));
    expect(other.taskId).not.toBe(first.taskId);
  });

  it('gives concurrent retries one task', async () => {
    const calls = await Promise.all(
      Array.from({ length: 12 }, () =>
        server.mcp.callTool('analyze_numbers', { count: 10 }, withKey('burst')),
      ),
    );
    expect(new Set(calls.map((c) => c.taskId)).size).toBe(1);
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from tasks where tool_name = 'analyze_numbers' and arguments = '{"count":10}'::jsonb`.execute(
      server.rt.db,
    );
    expect(rows[0]!.n).toBe(1);
  });

  it('refuses the same key for other arguments, and a key that is not a short string, with -32602', async () => {
    await server.mcp.callTool('analyze_numbers', { count: 5 }, withKey('reused'));
    const reused = await server.mcp.error(
      'tools/call',
      { name: 'analyze_numbers', arguments: { count: 6 } },
      withKey('reused'),
    );
    expect(reused).toMatchObject({
      status: 200,
      code: -32602,
      message: expect.stringMatching(/idempotency key/),
    });
    for (const bad of [42, '', 'k'.repeat(256)]) {
      const refused = await server.mcp.error(
        'tools/call',
        { name: 'analyze_numbers', arguments: { count: 5 } },
        withKey(bad),
      );
      expect(refused.code).toBe(-32602);
    }
  });
});

describe("a tool's idempotencyKey", () => {
  it('makes calls with the same key one task, whatever the client sends', async () => {
    const a = await server.mcp.callTool('report', { id: 'r-7' });
    const b = await server.mcp.callTool('report', { id: 'r-7' });
    const c = await server.mcp.callTool('report', { id: 'r-8' });
    expect(b.taskId).toBe(a.taskId);
    expect(c.taskId).not.toBe(a.taskId);
    // The same id with other arguments is another request under the same key.
    const clash = await server.mcp.error('tools/call', {
      name: 'report',
      arguments: { id: 'r-7', format: 'pdf' },
    });
    expect(clash.code).toBe(-32602);
    // A client key of the same text is another space: not the tool's.
    const client = await server.mcp.callTool('analyze_numbers', { count: 3 }, withKey('r-7'));
    expect(client.taskId).not.toBe(a.taskId);
  });
});
