/**
 * Hostile input at volume (`npm run test:fuzz`, run by .ci/run). Starts the server as its own process
 * (HTTP + workers, bearer auth with two principals) and sends at least 10,000 generated malformed or
 * adversarial requests mixed with valid traffic: invalid JSON and UTF-8, wrong types in every field,
 * huge strings, deep nesting, duplicate keys, header/body mismatches, Base64-sentinel abuse, unknown and
 * foreign task ids, updates for keys never issued, concurrent cancels and updates of one task.
 * Checks: every request gets a well-formed response with an expected status (never 5xx); the process
 * never exits; its memory after the run is within 10% of before; every valid task ends with its correct
 * result; no stored task is changed by an invalid request. Bounded in count and time; seeded.
 *
 *   ADMIN_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node --import tsx test/system/fuzz.ts [count]
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import { hashToken } from '../../src/http/auth/static-tokens.ts';
import { expectedAnalysis } from '../helpers/analysis.ts';
import { ACCEPT, mcpHeaders, mcpRequest, readReply, TASK_CAPS } from '../helpers/mcp.ts';
import { waitFor } from '../helpers/wait.ts';
import { assertWireValid } from '../helpers/wire-schema.ts';
import { startCluster } from '../helpers/system/cluster.ts';

const ADMIN =
  process.env.ADMIN_DATABASE_URL ??
  process.env.TEST_DATABASE_URL ??
  'postgres://postgres@127.0.0.1:5432/postgres';
const TOTAL = Number(process.argv[2] ?? 10_000);
const DEADLINE = Date.now() + 10 * 60_000;
const PV = '2026-07-28';
const TOKENS = { alice: 'alice-fuzz-token', mallory: 'mallory-fuzz-token' };
/** Must never appear in the server's logs, and neither may the tokens. */
const SECRET_ANSWER = 'fuzz-secret-answer';

// A small seeded PRNG (mulberry32), so that a failing run can be replayed.
let seed = Number(process.env.FUZZ_SEED ?? 20261202);
const rand = () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
const int = (n: number) => Math.floor(rand() * n);

// ---------- the server under test ----------
// One process (HTTP and workers) on a fresh database of the machine's Postgres.
const cluster = await startCluster({
  name: 'fuzz',
  instances: 1,
  workers: 0,
  nginx: false,
  pooler: 'none',
  postgres: { server: ADMIN },
  instance: ['src/main.ts'],
  nodeArgs: ['--expose-gc'],
  env: {
    LOG_LEVEL: 'warn',
    AUTH_MODE: 'bearer',
    AUTH_TOKENS: `alice=${hashToken(TOKENS.alice)},mallory=${hashToken(TOKENS.mallory)}`,
    TASK_POLL_INTERVAL_MS: '50',
    MAX_BODY_BYTES: '200000',
    WORKER_CONCURRENCY: '8',
  },
});
const server = cluster.http[0]!;
const URL_ = cluster.url;
// The server's memory probe (SIGUSR2: full GC, then a "memory" log line on stderr).
let lastMemory: { rss: number; heapUsed: number } | undefined;
let allLogs = '';
server.onLine((line) => {
  allLogs += `${line}\n`;
  if (line.includes('"msg":"memory"')) lastMemory = JSON.parse(line) as { rss: number; heapUsed: number };
});
async function memory(): Promise<{ rss: number; heapUsed: number }> {
  lastMemory = undefined;
  server.child.kill('SIGUSR2');
  return waitFor(() => lastMemory, { timeoutMs: 5_000, what: 'a memory report from the server' });
}

// ---------- requests ----------
interface Sent {
  body: string | Buffer;
  headers: Record<string, string>;
  method?: string;
}
interface Got {
  status: number;
  text: string;
  json: Record<string, any> | undefined;
}

async function send({ body, headers }: Sent): Promise<Got> {
  const res = await fetch(URL_, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: ACCEPT, ...headers },
    body,
  });
  const reply = await readReply(res);
  return { status: reply.status, text: reply.text, json: reply.messages.at(-1) };
}

function request(
  method: string,
  params: Record<string, unknown>,
  who: keyof typeof TOKENS = 'alice',
  caps: Record<string, unknown> = TASK_CAPS,
): Sent {
  return {
    method,
    body: JSON.stringify(mcpRequest(method, params, { caps })),
    headers: mcpHeaders(method, params, { authorization: `Bearer ${TOKENS[who]}` }),
  };
}

async function valid(sent: Sent): Promise<Record<string, any>> {
  const got = await send(sent);
  if (got.status !== 200 || got.json?.result === undefined)
    throw new Error(`valid request failed: ${got.status} ${got.text.slice(0, 300)}`);
  return got.json.result as Record<string, any>;
}

async function settle(taskId: string, who: keyof typeof TOKENS, until: (t: Record<string, any>) => boolean) {
  return waitFor(
    async () => {
      const task = await valid(request('tasks/get', { taskId }, who));
      return until(task) && task;
    },
    { timeoutMs: Math.max(0, DEADLINE - Date.now()), intervalMs: 50, what: `task ${taskId} settling` },
  );
}
const terminal = (t: Record<string, any>) =>
  ['completed', 'failed', 'cancelled'].includes(t.status as string);

// ---------- victims: tasks that no invalid request may change ----------
const victims: string[] = [];
for (let i = 0; i < 5; i++)
  victims.push(
    (await valid(request('tools/call', { name: 'analyze_numbers', arguments: { count: 100 + i } }))).taskId,
  );
for (let i = 0; i < 5; i++)
  victims.push(
    (await valid(request('tools/call', { name: 'confirm_action', arguments: { action: `victim-${i}` } })))
      .taskId,
  );
for (const id of victims) await settle(id, 'alice', (t) => terminal(t) || t.status === 'input_required');
const db = await cluster.database.connect();
const snapshot = async () =>
  (
    await db.query(
      `select t.*, (select json_agg(r order by r.key) from task_input_requests r where r.task_id = t.task_id) as inputs
         from tasks t where t.task_id = any($1) order by t.task_id`,
      [victims],
    )
  ).rows;
const before = await snapshot();

// ---------- the generators ----------
const TOOLS = ['echo', 'analyze_numbers', 'confirm_action', 'fail_with', 'nope', ''];
const METHODS = [
  'tools/call',
  'tools/list',
  'tasks/get',
  'tasks/update',
  'tasks/cancel',
  'server/discover',
  'initialize',
  'tasks/result',
  'x',
];
const WEIRD: unknown[] = [
  null,
  true,
  0,
  -1,
  1.5,
  1e308,
  '',
  'x'.repeat(1000),
  [],
  {},
  [1, [2]],
  { a: { b: {} } },
  '\u0000',
  '\ud800',
];

type Case = { kind: string; sent: Sent; statuses: number[]; code?: number };
const ALL = [200, 202, 400, 401, 403, 404, 405, 413, 429];

function hostile(): Case {
  const victim = pick(victims);
  switch (int(13)) {
    case 0: {
      const good = request('tools/call', { name: 'echo', arguments: { text: 'x' } }).body as string;
      return {
        kind: 'invalid-json',
        sent: { body: good.slice(0, 1 + int(good.length - 2)), headers: request('x', {}).headers },
        statuses: [400],
        code: -32700,
      };
    }
    case 1: {
      const raw = Buffer.from(
        request('tools/call', { name: 'echo', arguments: { text: 'AAAA' } }).body as string,
      );
      const at = raw.indexOf('AAAA');
      raw[at] = 0xff;
      raw[at + 1] = 0xfe;
      return {
        kind: 'invalid-utf8',
        sent: { body: raw, headers: request('tools/call', { name: 'echo' }).headers },
        statuses: [200, 400],
      };
    }
    case 2: {
      // Wrong types in one field of an otherwise valid request.
      const field = pick([
        'jsonrpc',
        'id',
        'method',
        'params',
        '_meta',
        'version',
        'caps',
        'name',
        'arguments',
        'taskId',
        'inputResponses',
      ]);
      const base = JSON.parse(
        request('tools/call', { name: 'echo', arguments: { text: 'x' } }).body as string,
      ) as Record<string, any>;
      const w = pick(WEIRD);
      if (field === 'jsonrpc' || field === 'id' || field === 'method' || field === 'params') base[field] = w;
      else if (field === '_meta') base.params._meta = w;
      else if (field === 'version') base.params._meta['io.modelcontextprotocol/protocolVersion'] = w;
      else if (field === 'caps') base.params._meta['io.modelcontextprotocol/clientCapabilities'] = w;
      else if (field === 'taskId' || field === 'inputResponses') {
        base.method = field === 'taskId' ? 'tasks/get' : 'tasks/update';
        base.params = {
          ...base.params,
          taskId: field === 'taskId' ? w : victim,
          inputResponses: field === 'inputResponses' ? w : {},
        };
      } else base.params[field] = w;
      const mcpName = base.params?.name ?? base.params?.taskId;
      return {
        kind: `wrong-type:${field}`,
        sent: {
          body: JSON.stringify(base),
          headers: {
            authorization: `Bearer ${TOKENS.alice}`,
            'mcp-protocol-version': PV,
            'mcp-method':
              typeof base.method === 'string' && /^[\x21-\x7e]+$/.test(base.method) ? base.method : 'x',
            ...(typeof mcpName === 'string' && /^[\x20-\x7e]*$/.test(mcpName) ? { 'mcp-name': mcpName } : {}),
          },
        },
        statuses: [200, 400, 404],
      };
    }
    case 3:
      return {
        kind: 'huge-string',
        sent: request('tools/call', { name: 'echo', arguments: { text: 'z'.repeat(50_000 + int(300_000)) } }),
        statuses: [200, 413],
      };
    case 4: {
      const d = 65 + int(5000);
      return {
        kind: 'deep-nesting',
        sent: {
          body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":${'['.repeat(d)}${']'.repeat(d)}}`,
          headers: request('tools/call', { name: 'echo' }).headers,
        },
        statuses: [400],
        code: -32600,
      };
    }
    case 5: {
      const body = `{"jsonrpc":"2.0","id":1,"method":"tasks/get","method":"tasks/cancel","params":{"taskId":"${victim}","taskId":"AAAAAAAAAAAAAAAAAAAAAAAA","_meta":{"io.modelcontextprotocol/protocolVersion":"${PV}","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`;
      return {
        kind: 'duplicate-keys',
        sent: {
          body,
          headers: {
            authorization: `Bearer ${TOKENS.mallory}`,
            'mcp-protocol-version': PV,
            'mcp-method': 'tasks/cancel',
            'mcp-name': 'AAAAAAAAAAAAAAAAAAAAAAAA',
          },
        },
        statuses: [200],
        code: -32602,
      };
    }
    case 6: {
      const sent = request(pick(METHODS.slice(0, 5)), {
        name: 'echo',
        arguments: { text: 'x' },
        taskId: victim,
        inputResponses: {},
      });
      const which = pick(['mcp-method', 'mcp-name', 'mcp-protocol-version']);
      const values = ['tools/list', 'wrong', '2025-11-25', 'TOOLS/CALL', 'tasks/get'].filter(
        (v) => v !== sent.headers[which],
      );
      sent.headers[which] = pick(values);
      // A method without Mcp-Name (tools/list) only mismatches on the other two headers.
      if (which === 'mcp-name' && sent.method === 'tools/list') sent.headers['mcp-method'] = 'wrong';
      return { kind: 'header-mismatch', sent, statuses: [400], code: -32020 };
    }
    case 7: {
      const sent = request('tools/call', { name: 'echo', arguments: { text: 'x' } });
      sent.headers['mcp-name'] = pick([
        '=?base64?',
        '=?base64?!!!!?=',
        '=?base64?ZWNobw?=',
        `=?base64?${Buffer.from('ech0').toString('base64')}?=`,
        `=?base64?${Buffer.from([0xff, 0xfe]).toString('base64')}?=`,
        `=?base64?${'QUFB'.repeat(2000)}?=`,
        '=?BASE64?ZWNobw==?=',
      ]);
      return { kind: 'base64-sentinel', sent, statuses: [400], code: -32020 };
    }
    case 8:
      return {
        kind: 'unknown-task',
        sent: request(pick(['tasks/get', 'tasks/update', 'tasks/cancel']), {
          taskId: randomBytes(18).toString('base64url'),
          inputResponses: {},
        }),
        statuses: [200],
        code: -32602,
      };
    case 9:
      return {
        kind: 'foreign-task',
        sent: request(
          pick(['tasks/get', 'tasks/update', 'tasks/cancel']),
          { taskId: victim, inputResponses: { confirm: { action: 'accept', content: { confirm: true } } } },
          'mallory',
        ),
        statuses: [200],
        code: -32602,
      };
    case 10:
      return {
        kind: 'never-issued-keys',
        sent: request('tasks/update', {
          taskId: victim,
          inputResponses: { [`k${int(1000)}`]: { action: 'accept', content: {} } },
        }),
        statuses: [200],
      };
    case 11: {
      const sent = request('tools/call', {
        name: pick(TOOLS),
        arguments: { count: pick(WEIRD), text: pick(WEIRD), kind: pick(WEIRD), action: pick(WEIRD) },
      });
      return { kind: 'bad-arguments', sent, statuses: [200, 400] };
    }
    default: {
      const sent = request('server/discover', {});
      if (rand() < 0.5)
        sent.headers.authorization = pick(['Bearer nope', 'Basic x', '', `Bearer ${TOKENS.alice}x`]);
      else sent.headers.origin = 'http://evil.example';
      return { kind: 'auth-or-origin', sent, statuses: [401, 403] };
    }
  }
}

// ---------- valid traffic mixed in ----------
const validTasks: Array<{
  taskId: string;
  who: keyof typeof TOKENS;
  check: (t: Record<string, any>) => boolean;
}> = [];
async function validWork(i: number): Promise<void> {
  const who = i % 2 === 0 ? 'alice' : 'mallory';
  switch (i % 4) {
    case 0: {
      const count = 1000 + int(20_000);
      const t = await valid(
        request('tools/call', { name: 'analyze_numbers', arguments: { count, chunkSize: 5000 } }, who),
      );
      validTasks.push({
        taskId: t.taskId,
        who,
        check: (d) => isDeepStrictEqual(d.result?.structuredContent, expectedAnalysis(count, 5000)),
      });
      return;
    }
    case 1: {
      const t = await valid(
        request('tools/call', { name: 'confirm_action', arguments: { action: `v${i}` } }, who),
      );
      await settle(t.taskId, who, (d) => d.status === 'input_required');
      // Concurrent updates and cancels of one task: it ends either confirmed or cancelled, never anything else.
      const update = () =>
        valid(
          request(
            'tasks/update',
            {
              taskId: t.taskId,
              inputResponses: {
                confirm: { action: 'accept', content: { confirm: true, note: SECRET_ANSWER } },
              },
            },
            who,
          ),
        );
      await Promise.all([
        update(),
        update(),
        ...(i % 8 === 1 ? [valid(request('tasks/cancel', { taskId: t.taskId }, who))] : []),
      ]);
      validTasks.push({
        taskId: t.taskId,
        who,
        check: (d) =>
          (d.status === 'completed' && d.result?.content?.[0]?.text === `confirmed: v${i}`) ||
          d.status === 'cancelled',
      });
      return;
    }
    case 2: {
      const t = await valid(request('tools/call', { name: 'fail_with', arguments: { kind: 'tool' } }, who));
      validTasks.push({
        taskId: t.taskId,
        who,
        check: (d) => d.status === 'completed' && d.result?.isError === true,
      });
      return;
    }
    default: {
      const r = await valid(request('tools/call', { name: 'echo', arguments: { text: `echo ${i}` } }, who));
      if (r.content?.[0]?.text !== `echo ${i}`) throw new Error('echo returned the wrong text');
    }
  }
}

// ---------- run ----------
const problems: string[] = [];
const byKind = new Map<string, number>();
let sentCount = 0;
let validCount = 0;

async function one(c: Case): Promise<void> {
  let got: Got;
  try {
    got = await send(c.sent);
  } catch (err) {
    problems.push(`${c.kind}: no response (${String(err)}: ${String((err as { cause?: unknown }).cause)})`);
    return;
  }
  sentCount++;
  byKind.set(c.kind, (byKind.get(c.kind) ?? 0) + 1);
  if (!c.statuses.includes(got.status) || !ALL.includes(got.status)) {
    problems.push(
      `${c.kind}: status ${got.status} (expected ${c.statuses.join('/')}): ${got.text.slice(0, 200)}`,
    );
    return;
  }
  if (got.status === 202) return;
  try {
    if (got.json === undefined) throw new Error('empty body');
    assertWireValid('(raw)', got.json);
    if (c.code !== undefined && got.json.error?.code !== c.code)
      throw new Error(`code ${got.json.error?.code}, expected ${c.code}`);
    if (/\.ts:\d+|node_modules|select .* from/i.test(got.text)) throw new Error('internals leaked');
  } catch (err) {
    problems.push(`${c.kind}: ${String(err).slice(0, 300)}`);
  }
}

const WARMUP = Math.min(2000, Math.floor(TOTAL / 5));
async function phase(n: number, label: string): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (next < n && Date.now() < DEADLINE && server.alive) {
        const i = next++;
        if (i % 20 === 0) {
          validCount++;
          await validWork(i / 20).catch((err: unknown) =>
            problems.push(`valid traffic: ${String(err).slice(0, 300)}`),
          );
        } else await one(hostile());
      }
    }),
  );
  console.log(`${label}: ${n} requests`);
}

await phase(WARMUP, 'warm-up');
// Both heap readings come after a quiet second (legs finishing, timers firing), so that they compare
// like with like: the pause is part of the measurement, not a wait for a condition.
await sleep(1000);
const memBefore = await memory();
await phase(TOTAL, 'fuzz');
for (const v of validTasks) {
  const done = await settle(v.taskId, v.who, terminal).catch((err: unknown) => ({ status: String(err) }));
  if (!v.check(done))
    problems.push(`valid task ${v.taskId} ended wrong: ${JSON.stringify(done).slice(0, 300)}`);
}
await sleep(1000); // the quiet second before the second heap reading (see above)
const memAfter = await memory();
const after = await snapshot();
if (!isDeepStrictEqual(before, after)) problems.push('a victim task changed');
if (!server.alive) problems.push('the server process exited');
for (const secret of [...Object.values(TOKENS), SECRET_ANSWER]) {
  if (allLogs.includes(secret)) problems.push(`the server logged a secret (${secret.slice(0, 5)}…)`);
}
// Live memory (the heap after a full GC) is what a leak grows; RSS is reported too, but V8 keeps pages it
// once grew into (huge bodies) without that being a leak.
const growth = (memAfter.heapUsed - memBefore.heapUsed) / memBefore.heapUsed;
if (growth > 0.1)
  problems.push(
    `live heap grew ${(growth * 100).toFixed(1)}% (${memBefore.heapUsed} → ${memAfter.heapUsed} bytes)`,
  );

console.log(
  `sent ${sentCount} hostile requests and ${validCount} valid operations (${validTasks.length} valid tasks checked)`,
);
for (const [kind, n] of [...byKind].sort()) console.log(`  ${kind.padEnd(28)} ${n}`);
const mb = (n: number) => `${(n / 1e6).toFixed(1)} MB`;
console.log(
  `live heap after GC: ${mb(memBefore.heapUsed)} → ${mb(memAfter.heapUsed)} (${(growth * 100).toFixed(1)}%)`,
);
console.log(`RSS: ${mb(memBefore.rss)} → ${mb(memAfter.rss)}`);
console.log(
  `victim tasks unchanged: ${isDeepStrictEqual(before, after)}; server alive: ${server.alive}; log lines: ${allLogs.split('\n').length - 1}, none with a token or an answer`,
);
for (const p of problems.slice(0, 20)) console.log(`  PROBLEM ${p}`);
console.log(`${sentCount + validCount - problems.length} passed, ${problems.length} failed`);

await db.end();
await cluster.stop();
process.exit(problems.length === 0 && sentCount >= TOTAL * 0.9 ? 0 : 1);
