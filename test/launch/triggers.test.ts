/**
 * Triggers as a tools module declares them: a trigger of a tool the module does not serve, or two of one
 * name, is one line when the module loads (and when a server built from them starts, before it
 * connects). The verifiers on their own: what each lets in and what it refuses, and why (for the log).
 */
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { loadToolsModule } from '../../src/cli/load-tools.ts';
import {
  bearer,
  createServer,
  defineTool,
  defineTrigger,
  hmacSha256,
  stripeSignature,
} from '../../src/index.ts';
import type { TriggerRequest } from '../../src/index.ts';

const INDEX = pathToFileURL(path.resolve('src/index.ts')).href;
const dir = mkdtempSync(path.join(tmpdir(), 'triggers-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A tools module with one tool, `echo`, and the triggers given as source. */
function moduleWith(name: string, triggers: string): string {
  const file = path.join(dir, `${name}.mts`);
  writeFileSync(
    file,
    `import { z } from 'zod';
import { bearer, defineTool, defineTrigger } from '${INDEX}';
export const tools = [defineTool({ name: 'echo', description: 'Echoes.', inputSchema: z.object({}), async handler() { return { content: [] }; } })];
const trigger = (name, tool) => defineTrigger({ name, tool, principal: 'ops', verify: bearer('t0ken'), arguments: () => ({}), idempotencyKey: () => 'k' });
export const triggers = [${triggers}];
`,
  );
  return file;
}

describe('triggers in a tools module', () => {
  it('loads a module whose triggers name its tools', async () => {
    const file = moduleWith('good', "trigger('hook', 'echo')");
    const mod = await loadToolsModule(file);
    expect(mod.triggers?.map((t) => t.name)).toEqual(['hook']);
  });

  it('a trigger of a tool the module does not serve: one line', async () => {
    const file = moduleWith('unknown-tool', "trigger('hook', 'ehco')");
    await expect(loadToolsModule(file)).rejects.toThrow(
      new Error(`--tools ${file}: Trigger hook: no tool named ehco is served`),
    );
  });

  it('two triggers of one name: one line', async () => {
    const file = moduleWith('twice', "trigger('hook', 'echo'), trigger('hook', 'echo')");
    await expect(loadToolsModule(file)).rejects.toThrow(
      new Error(`--tools ${file}: Trigger hook is defined twice`),
    );
  });

  it('a server with a trigger of a tool it does not serve fails to start before it connects', async () => {
    const echo = defineTool({
      name: 'echo',
      description: 'Echoes.',
      inputSchema: z.object({}),
      async handler() {
        return { content: [] };
      },
    });
    const server = createServer({
      tools: [echo],
      triggers: [
        defineTrigger({
          name: 'hook',
          tool: 'missing',
          principal: 'ops',
          verify: bearer('t0ken'),
          arguments: () => ({}),
          idempotencyKey: () => 'k',
        }),
      ],
      // Nothing listens there: a start that tried to connect would fail otherwise.
      databaseUrl: 'postgres://postgres@127.0.0.1:1/none',
      settings: { LOG_LEVEL: 'silent' },
    });
    await expect(server.start()).rejects.toThrow('Trigger hook: no tool named missing is served');
    await server.stop();
  });

  it('a name that is no path segment is refused where it is defined', () => {
    expect(() =>
      defineTrigger({
        name: 'a/b',
        tool: 'echo',
        principal: 'ops',
        verify: bearer('t0ken'),
        arguments: () => ({}),
        idempotencyKey: () => 'k',
      }),
    ).toThrow('defineTrigger: name "a/b" must be 1 to 64 letters, digits, _ or -');
    expect(() => bearer('')).toThrow("bearer: secret must be a non-empty string or { env: 'NAME' }");
  });
});

const request = (body: string, headers: Record<string, string>, now = Date.now()): TriggerRequest => ({
  rawBody: new TextEncoder().encode(body),
  headers: new Headers(headers),
  now,
});
const hmac = (key: string, text: string) => createHmac('sha256', key).update(text).digest('hex');

describe('verifiers', () => {
  it('hmacSha256: the digest after the prefix, of the exact bytes', () => {
    const verify = hmacSha256({ secret: 's3cret', header: 'X-Signature', prefix: 'sha256=' });
    const body = '{"a":1}';
    expect(verify(request(body, { 'x-signature': `sha256=${hmac('s3cret', body)}` }))).toEqual({
      verified: true,
    });
    expect(verify(request(`${body} `, { 'x-signature': `sha256=${hmac('s3cret', body)}` }))).toEqual({
      verified: false,
      reason: 'X-Signature does not match the body',
    });
    expect(verify(request(body, { 'x-signature': hmac('s3cret', body) }))).toEqual({
      verified: false,
      reason: 'X-Signature does not start with sha256=',
    });
  });

  it('stripeSignature: any v1 of the header (a secret being rolled), within the tolerance either way', () => {
    const verify = stripeSignature({ secret: 'whsec_x', toleranceSeconds: 60 });
    const body = '{"id":"evt_1"}';
    const now = 1_800_000_000_000;
    const t = now / 1000;
    const header = (at: number) =>
      `t=${at},v1=${hmac('whsec_old', `${at}.${body}`)},v1=${hmac('whsec_x', `${at}.${body}`)}`;
    expect(verify(request(body, { 'stripe-signature': header(t - 30) }, now))).toEqual({ verified: true });
    for (const at of [t - 61, t + 61]) {
      expect(verify(request(body, { 'stripe-signature': header(at) }, now))).toEqual({
        verified: false,
        reason: "Stripe-Signature's timestamp is outside the tolerance of 60 s",
      });
    }
    expect(verify(request(body, { 'stripe-signature': `t=${t}` }, now))).toMatchObject({ verified: false });
  });

  it('a secret from the environment is read at each request; unset, every request is refused', () => {
    const verify = bearer({ env: 'TEST_TRIGGER_BEARER' });
    const withToken = request('', { authorization: 'Bearer rotating' });
    expect(verify(withToken)).toEqual({ verified: false, reason: 'TEST_TRIGGER_BEARER is not set' });
    process.env.TEST_TRIGGER_BEARER = 'rotating';
    try {
      expect(verify(withToken)).toEqual({ verified: true });
      process.env.TEST_TRIGGER_BEARER = 'rotated';
      expect(verify(withToken)).toEqual({ verified: false, reason: 'the bearer token does not match' });
    } finally {
      delete process.env.TEST_TRIGGER_BEARER;
    }
  });
});
