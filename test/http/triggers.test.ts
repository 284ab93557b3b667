/**
 * Webhook triggers (`defineTrigger`, `POST /triggers/{name}`) over a real socket, on a real Postgres and
 * pg-boss: deliveries signed exactly as GitHub and Stripe sign them start a task that runs to completion
 * on a worker; a redelivery (in a row, all at once, or to two instances at once) gets the same task and
 * stores no other; a forged, missing or stale signature, an oversized body (declared or streamed) and
 * arguments the tool refuses store nothing.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { bearer, defineTool, defineTrigger, hmacSha256, stripeSignature } from '../../src/index.ts';
import { sample, scrape } from '../helpers/prometheus.ts';
import { startTestProcess, useTestServer } from '../helpers/server-process.ts';

const GITHUB_SECRET = 'It’s a Secret to Everybody';
const STRIPE_SECRET = 'whsec_test_0123456789abcdef';
const STRIPE_ENV = 'TEST_TRIGGERS_STRIPE_SECRET';
const MAX_BODY = 8_192;

const build = defineTool({
  name: 'build',
  description: 'Builds a commit.',
  inputSchema: z.object({ repo: z.string(), sha: z.string().regex(/^[0-9a-f]{40}$/) }),
  taskSupport: 'required',
  async handler({ repo, sha }, ctx) {
    const built = await ctx.step('build', async () => `${repo}@${sha.slice(0, 7)}`);
    return { content: [{ type: 'text', text: `built ${built}` }] };
  },
});

const fulfil = defineTool({
  name: 'fulfil_order',
  description: 'Fulfils a paid order.',
  inputSchema: z.object({ eventId: z.string(), amount: z.number().int() }),
  taskSupport: 'optional',
  async handler({ eventId, amount }) {
    return { content: [{ type: 'text', text: `fulfilled ${eventId} (${amount})` }] };
  },
});

interface PushEvent {
  after: string;
  repository: { full_name: string };
}

const triggers = [
  defineTrigger<PushEvent>({
    name: 'github-push',
    tool: 'build',
    principal: 'local',
    verify: hmacSha256({ secret: GITHUB_SECRET, header: 'X-Hub-Signature-256', prefix: 'sha256=' }),
    arguments: (body) => ({ repo: body.repository.full_name, sha: body.after }),
    idempotencyKey: (_body, headers) => headers.get('X-GitHub-Delivery') ?? '',
  }),
  defineTrigger<{ id: string; data: { object: { amount: number } } }>({
    name: 'stripe',
    tool: 'fulfil_order',
    principal: 'local',
    verify: stripeSignature({ secret: { env: STRIPE_ENV } }),
    arguments: (event) => ({ eventId: event.id, amount: event.data.object.amount }),
    idempotencyKey: (event) => event.id,
  }),
  defineTrigger<{ repo: string; sha: string; id: string }>({
    name: 'deploy-hook',
    tool: 'build',
    principal: 'local',
    verify: bearer('deploy-hook-token-0123456789'),
    arguments: ({ repo, sha }) => ({ repo, sha }),
    idempotencyKey: (body) => body.id,
  }),
];

const server = useTestServer({
  tools: [build, fulfil],
  triggers,
  env: { TRIGGER_MAX_BODY_BYTES: String(MAX_BODY) },
});

beforeAll(() => {
  process.env[STRIPE_ENV] = STRIPE_SECRET;
});
afterAll(() => {
  delete process.env[STRIPE_ENV];
});

const sha = () => randomUUID().replaceAll('-', '').padEnd(40, '0');
const pushEvent = (commit = sha()) => ({
  ref: 'refs/heads/main',
  after: commit,
  repository: { full_name: 'octo/hello' },
});

/** As GitHub signs a delivery: the hex HMAC-SHA256 of the raw body with the webhook's secret. */
const githubSignature = (body: string, secret = GITHUB_SECRET) =>
  `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;

/** As Stripe signs an event: `t=<seconds>,v1=<hex HMAC-SHA256 of "t.body">`. */
const stripeHeader = (body: string, t = Math.floor(Date.now() / 1000), secret = STRIPE_SECRET) =>
  `t=${t},v1=${createHmac('sha256', secret).update(`${t}.${body}`).digest('hex')}`;

/** POSTs to a trigger; a stream goes chunked, with no length declared. */
function post(name: string, body: string | ReadableStream<Uint8Array>, headers: Record<string, string> = {}) {
  const init: RequestInit & { duplex?: 'half' } = {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
    ...(typeof body !== 'string' && { duplex: 'half' as const }),
  };
  return fetch(new URL(`/triggers/${name}`, server.rt.url), init);
}

function pushDelivery(body: string, delivery: string = randomUUID(), signature = githubSignature(body)) {
  return post('github-push', body, {
    'X-GitHub-Event': 'push',
    'X-GitHub-Delivery': delivery,
    'X-Hub-Signature-256': signature,
  });
}

async function taskCount(): Promise<number> {
  const { rows } = await sql<{ n: string }>`select count(*) as n from tasks`.execute(server.rt.db);
  return Number(rows[0]!.n);
}

/** The answer's status and JSON, and that nothing was stored while it was given. */
async function storingNothing(request: () => Promise<Response>) {
  const before = await taskCount();
  const res = await request();
  const body = (await res.json()) as Record<string, unknown>;
  expect(await taskCount()).toBe(before);
  return { status: res.status, body };
}

describe('webhook triggers', () => {
  it('a GitHub push, signed as GitHub signs it: 202 with the task, which runs to completion', async () => {
    const event = pushEvent();
    const res = await pushDelivery(JSON.stringify(event));
    expect(res.status).toBe(202);
    const answer = (await res.json()) as { taskId: string; status: string };
    expect(answer.status).toBe('working');
    expect(res.headers.get('location')).toBe(`/mcp/tasks/${answer.taskId}/events`);
    const done = await server.mcp.waitForTask(answer.taskId);
    expect(done.status).toBe('completed');
    expect(done.result.content).toEqual([
      { type: 'text', text: `built octo/hello@${event.after.slice(0, 7)}` },
    ]);
  });

  it('a Stripe event, signed as Stripe signs it (its secret from the environment), runs to completion', async () => {
    const event = { id: `evt_${randomUUID()}`, type: 'charge.succeeded', data: { object: { amount: 4200 } } };
    const body = JSON.stringify(event);
    const res = await post('stripe', body, { 'Stripe-Signature': stripeHeader(body) });
    expect(res.status).toBe(202);
    const { taskId } = (await res.json()) as { taskId: string };
    const done = await server.mcp.waitForTask(taskId);
    expect(done.result.content).toEqual([{ type: 'text', text: `fulfilled ${event.id} (4200)` }]);
  });

  it('a bearer-token sender is let in by its token only', async () => {
    const body = JSON.stringify({ repo: 'octo/deploy', sha: sha(), id: randomUUID() });
    const wrong = await storingNothing(() => post('deploy-hook', body, { authorization: 'Bearer nope' }));
    expect(wrong.status).toBe(401);
    const res = await post('deploy-hook', body, { authorization: 'Bearer deploy-hook-token-0123456789' });
    expect(res.status).toBe(202);
  });

  it('a delivery redelivered 5 times in a row, and 5 times at once, starts exactly one task each', async () => {
    const before = await taskCount();
    const body = JSON.stringify(pushEvent());
    const delivery = randomUUID();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await pushDelivery(body, delivery);
      expect(res.status).toBe(202);
      ids.push(((await res.json()) as { taskId: string }).taskId);
    }
    expect(new Set(ids).size).toBe(1);
    expect(await taskCount()).toBe(before + 1);

    const concurrentBody = JSON.stringify(pushEvent());
    const concurrentDelivery = randomUUID();
    const answers = await Promise.all(
      Array.from({ length: 5 }, () => pushDelivery(concurrentBody, concurrentDelivery)),
    );
    expect(answers.map((r) => r.status)).toEqual([202, 202, 202, 202, 202]);
    const concurrentIds = await Promise.all(
      answers.map(async (r) => ((await r.json()) as { taskId: string }).taskId),
    );
    expect(new Set(concurrentIds).size).toBe(1);
    expect(concurrentIds[0]).not.toBe(ids[0]);
    expect(await taskCount()).toBe(before + 2);
  });

  it('a delivery sent to two instances at once starts one task, which runs to completion', async () => {
    const other = await startTestProcess({
      databaseUrl: server.tdb.url,
      role: 'server',
      tools: [build, fulfil],
      triggers,
    });
    try {
      const before = await taskCount();
      const body = JSON.stringify(pushEvent());
      const delivery = randomUUID();
      const signature = githubSignature(body);
      const headers = { 'X-GitHub-Delivery': delivery, 'X-Hub-Signature-256': signature };
      const answers = await Promise.all(
        [server.rt.url, other.url, server.rt.url, other.url, server.rt.url, other.url].map((url) =>
          fetch(new URL('/triggers/github-push', url), { method: 'POST', headers, body }),
        ),
      );
      expect(answers.map((r) => r.status)).toEqual([202, 202, 202, 202, 202, 202]);
      const ids = await Promise.all(
        answers.map(async (r) => ((await r.json()) as { taskId: string }).taskId),
      );
      expect(new Set(ids).size).toBe(1);
      expect(await taskCount()).toBe(before + 1);
      expect((await server.mcp.waitForTask(ids[0]!)).status).toBe('completed');
    } finally {
      await other.stop();
    }
  });

  it('a forged signature, a missing one and a stale Stripe timestamp: 401, nothing stored', async () => {
    const body = JSON.stringify(pushEvent());
    const forged = await storingNothing(() =>
      pushDelivery(body, randomUUID(), githubSignature(body, 'not the secret')),
    );
    expect(forged).toEqual({ status: 401, body: { error: 'the request could not be verified' } });
    // The body changed after it was signed.
    const tampered = await storingNothing(() =>
      pushDelivery(body.replace('octo/hello', 'evil/repo'), randomUUID(), githubSignature(body)),
    );
    expect(tampered.status).toBe(401);
    const missing = await storingNothing(() =>
      post('github-push', body, { 'X-GitHub-Delivery': randomUUID() }),
    );
    expect(missing.status).toBe(401);

    const event = JSON.stringify({ id: `evt_${randomUUID()}`, data: { object: { amount: 1 } } });
    const tenMinutesAgo = Math.floor(Date.now() / 1000) - 600;
    const stale = await storingNothing(() =>
      post('stripe', event, { 'Stripe-Signature': stripeHeader(event, tenMinutesAgo) }),
    );
    expect(stale.status).toBe(401);
    const noSignature = await storingNothing(() => post('stripe', event));
    expect(noSignature.status).toBe(401);
  });

  it('a body over TRIGGER_MAX_BODY_BYTES, declared or streamed: 413, nothing stored', async () => {
    const padded = JSON.stringify({ ...pushEvent(), padding: 'x'.repeat(MAX_BODY) });
    const declared = await storingNothing(() => pushDelivery(padded));
    expect(declared).toEqual({ status: 413, body: { error: `the body exceeds ${MAX_BODY} bytes` } });
    // Chunked, with no length declared, and never ending: the answer comes as soon as the limit is
    // passed, while the sender is still sending (a server reading the whole body first never answers).
    const chunk = new TextEncoder().encode('x'.repeat(1_024));
    let sent = 0;
    let stopped: () => void = () => {};
    const stream = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (sent++ < 16) controller.enqueue(chunk);
        else await new Promise<void>((resolve) => (stopped = resolve));
      },
      cancel: () => stopped(),
    });
    const streamed = await storingNothing(() => post('github-push', stream));
    expect(streamed).toEqual({ status: 413, body: { error: `the body exceeds ${MAX_BODY} bytes` } });
    stopped();
  });

  it('an unknown trigger is 404, a body that is not JSON 400, arguments the tool refuses 422', async () => {
    const unknown = await storingNothing(() => post('no-such-trigger', '{}'));
    expect(unknown).toEqual({ status: 404, body: { error: 'no such trigger' } });
    const notJson = await storingNothing(() => pushDelivery('{"after":'));
    expect(notJson).toEqual({ status: 400, body: { error: 'the body is not JSON' } });
    const badSha = await storingNothing(() => pushDelivery(JSON.stringify(pushEvent('not-a-sha'))));
    expect(badSha.status).toBe(422);
    expect(badSha.body.error).toMatch(/^Invalid arguments for tool build: ✖ .* → at sha$/);
    expect(badSha.body.error).not.toContain('\n');
    // The body lacks what `arguments` reads: its TypeError, as one line.
    const shapeless = await storingNothing(() => pushDelivery(JSON.stringify({ zen: 'Keep it simple' })));
    expect(shapeless.status).toBe(422);
    expect(shapeless.body.error).toMatch(/^arguments failed: /);
    // The delivery id is missing: no idempotency key.
    const body = JSON.stringify(pushEvent());
    const keyless = await storingNothing(() =>
      post('github-push', body, { 'X-Hub-Signature-256': githubSignature(body) }),
    );
    expect(keyless).toEqual({
      status: 422,
      body: { error: 'idempotencyKey must return a string of 1 to 255 characters' },
    });
  });

  it('a delivery id reused for another event: 409, nothing stored', async () => {
    const delivery = randomUUID();
    expect((await pushDelivery(JSON.stringify(pushEvent()), delivery)).status).toBe(202);
    const reused = await storingNothing(() => pushDelivery(JSON.stringify(pushEvent()), delivery));
    expect(reused.status).toBe(409);
  });

  it('a principal over its creation rate: 429 with Retry-After, and only the admitted deliveries stored', async () => {
    const quota = defineTrigger<{ id: string }>({
      name: 'quota',
      tool: 'fulfil_order',
      principal: 'quota-test',
      verify: bearer('quota-token-0123456789'),
      arguments: ({ id }) => ({ eventId: id, amount: 1 }),
      idempotencyKey: ({ id }) => id,
    });
    const limited = await startTestProcess({
      databaseUrl: server.tdb.url,
      role: 'server',
      tools: [build, fulfil],
      triggers: [quota],
      env: { TASK_CREATE_RATE_PER_SECOND: '1', TASK_CREATE_BURST: '1' },
    });
    try {
      const before = await taskCount();
      const answers = await Promise.all(
        Array.from({ length: 5 }, () =>
          fetch(new URL('/triggers/quota', limited.url), {
            method: 'POST',
            headers: { authorization: 'Bearer quota-token-0123456789' },
            body: JSON.stringify({ id: randomUUID() }),
          }),
        ),
      );
      const statuses = answers.map((r) => r.status);
      const refused = answers.filter((r) => r.status === 429);
      expect(refused.length).toBeGreaterThanOrEqual(1);
      expect(refused.every((r) => Number(r.headers.get('retry-after')) >= 1)).toBe(true);
      expect(statuses.filter((s) => s !== 429).every((s) => s === 202)).toBe(true);
      expect(await taskCount()).toBe(before + statuses.filter((s) => s === 202).length);
    } finally {
      await limited.stop();
    }
  });

  it('counts deliveries by trigger and outcome', async () => {
    const metrics = await scrape(new URL(server.rt.url).origin);
    const count = (trigger: string, outcome: string) =>
      sample(metrics, 'durable_mcp_trigger_requests_total', { trigger, outcome });
    expect(count('github-push', 'accepted')).toBeGreaterThanOrEqual(11); // (on this instance)
    expect(count('github-push', 'unverified')).toBeGreaterThanOrEqual(3);
    expect(count('github-push', 'too_large')).toBeGreaterThanOrEqual(2);
    expect(count('stripe', 'unverified')).toBeGreaterThanOrEqual(2);
    expect(count('unknown', 'not_found')).toBeGreaterThanOrEqual(1);
    expect(count('github-push', 'conflict')).toBeGreaterThanOrEqual(1);
  });
});
