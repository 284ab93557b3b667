import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { hashToken } from '../../src/http/auth/static-tokens.ts';
import type { ServerProcess } from '../../src/process/start.ts';
import { defineTool } from '../../src/tools/define.ts';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { listen, RawMcp } from '../helpers/mcp.ts';
import { startTestProcess } from '../helpers/server-process.ts';

const whoami = defineTool({
  name: 'whoami',
  description: 'returns the principal the handler sees (test tool)',
  inputSchema: z.object({}),
  taskSupport: 'optional',
  handler: (_args, ctx) => ({ content: [{ type: 'text', text: ctx.principal }] }),
});

const PRINCIPALS = ['alice', 'bob', 'carol'] as const;
let tdb: TestDatabase;
let rt: ServerProcess & { url: string };
const as = (p: string) => ({ headers: { authorization: `Bearer ${p}-token` } });

beforeAll(async () => {
  tdb = await createTestDatabase();
  rt = await startTestProcess({
    databaseUrl: tdb.url,
    tools: [...SHIPPED_TOOLS, whoami],
    env: {
      AUTH_MODE: 'bearer',
      AUTH_TOKENS: PRINCIPALS.map((p) => `${p}=${hashToken(`${p}-token`)}`).join(','),
    },
  });
});
afterAll(async () => {
  await rt?.stop();
  await tdb?.drop();
});

describe('per-principal isolation', () => {
  it('no principal can read, update, cancel or hear about another principal’s tasks', async () => {
    const mcp = new RawMcp(rt.url);
    // Interleaved: each principal creates tasks, waiting for input and running.
    const own = new Map<string, string[]>();
    for (let round = 0; round < 3; round++) {
      for (const p of PRINCIPALS) {
        const a = await mcp.result(
          'tools/call',
          { name: 'confirm_action', arguments: { action: `${p}-${round}` } },
          as(p),
        );
        const b = await mcp.result(
          'tools/call',
          { name: 'analyze_numbers', arguments: { count: 10, delayMsPerChunk: 0 } },
          as(p),
        );
        own.set(p, [...(own.get(p) ?? []), a.taskId, b.taskId]);
      }
    }
    const unknown = await mcp.error('tasks/get', { taskId: 'AAAAAAAAAAAAAAAAAAAAAAAA' }, as('alice'));
    const bobStream = await listen(
      rt.url,
      { taskIds: [...own.get('alice')!, ...own.get('bob')!] },
      {
        id: 'bob-sub',
        headers: as('bob').headers,
      },
    );
    const ack = await bobStream.next();
    expect(ack.params.notifications.taskIds).toEqual(own.get('bob'));

    for (const attacker of PRINCIPALS) {
      for (const [victim, taskIds] of own) {
        if (victim === attacker) continue;
        for (const taskId of taskIds) {
          for (const method of ['tasks/get', 'tasks/update', 'tasks/cancel']) {
            const error = await mcp.error(
              method,
              { taskId, inputResponses: { confirm: { action: 'accept', content: { confirm: true } } } },
              as(attacker),
            );
            // Exactly what an unknown id gets: nothing tells the attacker the task exists.
            expect({ code: error.code, message: error.message, status: error.status }).toEqual({
              code: unknown.code,
              message: unknown.message,
              status: unknown.status,
            });
          }
        }
      }
    }
    // Nothing the attackers did changed anything: every confirm task still waits for its owner.
    for (const [p, taskIds] of own) {
      const waiting = await mcp.result('tasks/get', { taskId: taskIds[0]! }, as(p));
      expect(['working', 'input_required']).toContain(waiting.status);
      await mcp.result(
        'tasks/update',
        {
          taskId: taskIds[0]!,
          inputResponses: { confirm: { action: 'accept', content: { confirm: true } } },
        },
        as(p),
      );
    }
    // Bob's stream carried only Bob's tasks. The pause lets a leaked notification arrive before the
    // stream closes: "nothing foreign during 300 ms" is what is tested, so it is a sleep, not a wait.
    await new Promise((r) => setTimeout(r, 300));
    bobStream.close();
    const seen = new Set(
      bobStream.messages.filter((m) => m.method === 'notifications/tasks').map((m) => m.params.taskId),
    );
    for (const id of seen) expect(own.get('bob')).toContain(id);
    expect(seen.size).toBeGreaterThan(0);
  });

  it('tool handlers see the caller’s principal, synchronously and in tasks', async () => {
    const sync = new RawMcp(rt.url, {});
    expect(
      (await sync.result('tools/call', { name: 'whoami', arguments: {} }, as('carol'))).content[0].text,
    ).toBe('carol');
    const mcp = new RawMcp(rt.url);
    const created = await mcp.result('tools/call', { name: 'whoami', arguments: {} }, as('bob'));
    let task;
    do task = await mcp.result('tasks/get', { taskId: created.taskId }, as('bob'));
    while (task.status !== 'completed');
    expect(task.result.content[0].text).toBe('bob');
  });
});
