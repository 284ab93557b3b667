import { z } from 'zod';

const intFromEnv = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);
const boolFromEnv = (def: boolean) =>
  z
    .enum(['true', 'false', '1', '0'])
    .default(def ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1');

/** Every setting the server and the worker pool read from the environment, with its default. */
/** A libpq connection URI, checked here so that a typo is one clear line, not a DNS error at connect. */
const postgresUrl = z
  .string()
  .min(1)
  .refine((value) => {
    try {
      return ['postgres:', 'postgresql:', 'socket:'].includes(new URL(value).protocol);
    } catch {
      return false;
    }
  }, 'not a Postgres URL: postgres://user:password@host:5432/database');

/** `value` if it is a Postgres URL; otherwise the one-line error a user sees, naming `setting`. */
export function checkPostgresUrl(setting: string, value: string): string {
  const checked = postgresUrl.safeParse(value);
  if (!checked.success) throw new Error(`${setting}: ${checked.error.issues[0]?.message ?? 'invalid'}`);
  return checked.data;
}

const ConfigSchema = z.object({
  HOST: z
    .string()
    .min(1)
    .default('127.0.0.1')
    .describe('Address the HTTP server binds (a non-loopback address needs AUTH_MODE bearer or oauth).'),
  PORT: intFromEnv(3000).describe('HTTP port (0: any free port).'),
  DATABASE_URL: postgresUrl
    .optional()
    .describe('Postgres connection string. Unset: an embedded Postgres is started under EMBEDDED_PG_DIR.'),
  DATABASE_DIRECT_URL: postgresUrl
    .optional()
    .describe(
      'A direct (unpooled) connection to the same database, for what a transaction-mode pooler such as PgBouncer cannot carry: the LISTEN connection and migrations. Default: DATABASE_URL.',
    ),
  DB_PREPARED_STATEMENTS: z
    .enum(['auto', 'on', 'off'])
    .default('auto')
    .describe(
      'Run repeated statements as named prepared statements, parsed and planned once per connection. auto: on unless DATABASE_DIRECT_URL is set (a transaction-mode pooler in front; PgBouncer ≥ 1.21 with max_prepared_statements can take on).',
    ),
  MIGRATE_ON_START: boolFromEnv(true).describe(
    "Migrate (our schema and pg-boss's) when a process starts. Set false when processes run as a role that may not run DDL, and run `durable-mcp-tasks migrate` as the owner role instead.",
  ),
  DB_APP_ROLE: z
    .string()
    .min(1)
    .optional()
    .describe(
      'For `durable-mcp-tasks migrate` run as the owner: the runtime role to grant what the server and workers need.',
    ),
  EMBEDDED_PG_DIR: z
    .string()
    .min(1)
    .default('.data/postgres')
    .describe('Data directory of the embedded Postgres (used when DATABASE_URL is unset).'),
  EMBEDDED_PG_PORT: intFromEnv(54329, 1).describe('Port of the embedded Postgres (127.0.0.1 only).'),
  DB_POOL_MAX: intFromEnv(10, 1).describe("Connections in the server's own pool, per process."),
  DB_CONNECT_TIMEOUT_MS: intFromEnv(5_000, 100).describe(
    'How long a query waits for a connection before it fails (-32603), e.g. while Postgres restarts.',
  ),
  DB_STARTUP_TIMEOUT_MS: intFromEnv(60_000, 0).describe(
    'How long a starting process waits for an unreachable database (e.g. restarting) before it gives up.',
  ),
  DB_STATEMENT_TIMEOUT_MS: intFromEnv(30_000).describe(
    'Server-side timeouts of every pooled session (0: off): a stuck query or a client that died inside a transaction cannot hold locks forever.',
  ),
  DB_LOCK_TIMEOUT_MS: intFromEnv(10_000).describe('lock_timeout of every pooled session (0: off).'),
  DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: intFromEnv(60_000).describe(
    'idle_in_transaction_session_timeout of every pooled session (0: off).',
  ),
  QUEUE_POOL_MAX: intFromEnv(3, 1).describe("pg-boss's own pool (fetching and sending run jobs)."),
  QUEUE_JOB_RETENTION_S: intFromEnv(300, 1).describe(
    "How long pg-boss keeps a finished run job (s): a job is only 'run task X', the task's rows keep its history.",
  ),
  QUEUE_MAINTENANCE_INTERVAL_S: intFromEnv(60, 1).describe(
    "How often worker processes delete pg-boss's finished jobs past QUEUE_JOB_RETENTION_S (s).",
  ),
  AUTH_MODE: z
    .enum(['none', 'bearer', 'oauth'])
    .default('none')
    .describe(
      'none (loopback HOST only: every request is PRINCIPAL), bearer (AUTH_TOKENS), oauth (JWT via JWKS).',
    ),
  PRINCIPAL: z
    .string()
    .min(1)
    .default('local')
    .describe('The principal of every request when AUTH_MODE=none.'),
  AUTH_TOKENS: z
    .string()
    .default('')
    .describe(
      'bearer: `principal=<sha256 hex of the token>`, comma-separated; several per principal allowed.',
    ),
  OAUTH_ISSUER: z
    .string()
    .url()
    .optional()
    .describe('oauth: the authorization server (issuer) access tokens must come from.'),
  OAUTH_AUDIENCE: z
    .string()
    .min(1)
    .optional()
    .describe(
      "The audience access tokens must carry: this server's resource identifier. Default: PUBLIC_URL/mcp.",
    ),
  OAUTH_JWKS_URL: z.string().url().optional().describe('oauth: where the issuer publishes its signing keys.'),
  OAUTH_TENANT_CLAIM: z
    .string()
    .min(1)
    .optional()
    .describe('A claim that qualifies the subject (principal = `<tenant>/<sub>`).'),
  OAUTH_REQUIRED_SCOPES: z.string().default('').describe('Space-separated scopes every request needs.'),
  PUBLIC_URL: z
    .string()
    .url()
    .optional()
    .describe("The server's public base URL (behind TLS termination); default http://HOST:PORT."),
  ALLOWED_HOSTS: z
    .string()
    .default('')
    .describe(
      'Comma-separated Host names accepted (DNS-rebinding protection); default: loopback names when HOST is loopback.',
    ),
  MAX_JSON_DEPTH: intFromEnv(64, 1).describe('Deepest JSON nesting accepted in a request body.'),
  MAX_ARGUMENTS_BYTES: intFromEnv(262_144, 1).describe('Largest tools/call arguments (as JSON) accepted.'),
  MAX_INPUT_RESPONSES_BYTES: intFromEnv(65_536, 1).describe('Largest inputResponses (as JSON) accepted.'),
  MAX_SIGNAL_BYTES: intFromEnv(65_536, 1).describe(
    'Largest body of a signal delivery (POST /signals/{token}) accepted (413 above).',
  ),
  TRIGGER_MAX_BODY_BYTES: intFromEnv(1_048_576, 1).describe(
    'Largest body of a webhook delivery (POST /triggers/{name}) accepted: 413 above, read no further, nothing stored.',
  ),
  MAX_STEERING_MESSAGE_BYTES: intFromEnv(16_384, 1).describe(
    'Largest tasks/steer message (UTF-8 bytes; experimental, SEP-2669 draft) accepted: -32602 naming this setting above, nothing stored.',
  ),
  MAX_STEERING_MESSAGES_PER_TASK: intFromEnv(100, 1).describe(
    'Steering messages (tasks/steer) one task may get in its life; the next one gets -32602 naming this setting, nothing stored.',
  ),
  MAX_ACTIVE_TASKS_PER_PRINCIPAL: intFromEnv(1_000, 1).describe(
    'Non-terminal tasks (working, input_required) one principal may hold, cluster-wide; a create above it gets -31429 (HTTP 429).',
  ),
  TASK_CREATE_RATE_PER_SECOND: intFromEnv(100).describe(
    'Task creations per second per principal, cluster-wide (a token bucket in Postgres); above it -31429 (HTTP 429) with Retry-After. 0: no limit.',
  ),
  TASK_CREATE_BURST: intFromEnv(1_000, 1).describe(
    'Task creations one principal may make at once before TASK_CREATE_RATE_PER_SECOND applies (the bucket size).',
  ),
  MAX_SESSIONS_PER_PRINCIPAL: intFromEnv(1_000, 1).describe(
    '2025-11-25 sessions one principal may hold open (not ended, not idle past SESSION_IDLE_TTL_MS), cluster-wide; an initialize above it gets -31429 (HTTP 429).',
  ),
  MAX_SESSION_METADATA_BYTES: intFromEnv(16_384, 1).describe(
    'Largest capabilities and clientInfo of a 2025-11-25 initialize together (as JSON), stored with the session: -32602 above.',
  ),
  MAX_SUBSCRIPTIONS_PER_PRINCIPAL: intFromEnv(32, 1).describe(
    'Open subscriptions/listen streams per principal on one instance (429 above).',
  ),
  MAX_EVENT_STREAMS_PER_PRINCIPAL: intFromEnv(1_000, 1).describe(
    'Open task event streams (tasks/stream, GET /mcp/tasks/{taskId}/events) per principal on one instance; the next one gets -31429 (HTTP 429).',
  ),
  MAX_GET_STREAMS_PER_PRINCIPAL: intFromEnv(1_000, 1).describe(
    "Open 2025-11-25 GET streams (a session's own stream or a resumed one) per principal on one instance; the next GET gets -31429 (HTTP 429).",
  ),
  MAX_RESULT_WAITS_PER_PRINCIPAL: intFromEnv(1_000, 1).describe(
    'Open 2025-11-25 tasks/result waits per principal on one instance; the next one gets -31429 (HTTP 429).',
  ),
  MAX_STEPS_PER_TASK: intFromEnv(100_000, 1).describe(
    'Steps (ctx.step checkpoints, sleeps, signals) one task may record; the next one fails the task with -32603 naming the limit.',
  ),
  MAX_CHILD_DEPTH: intFromEnv(5, 1).describe(
    'How deep child tasks (ctx.callTool, ctx.spawn) may nest: a task started by a client is at depth 0, its children at 1; a spawn deeper than this fails with an error naming the setting.',
  ),
  MAX_CHILDREN_PER_TASK: intFromEnv(1_000, 1).describe(
    'Child tasks (ctx.callTool, ctx.spawn) one task may start in all; the next spawn fails with an error naming the setting.',
  ),
  MAX_RESULT_BYTES: intFromEnv(1_048_576, 1).describe(
    "A tool result larger than this (as JSON) is stored as the task's artifact `tool-result.json`, and the result the client gets holds a resource_link to it.",
  ),
  MAX_STEP_BYTES: intFromEnv(1_048_576, 1).describe(
    'A step whose value is larger than this (as JSON) fails its task with -32603 naming the step: write large outputs with ctx.artifact.',
  ),
  MAX_EVENT_BYTES: intFromEnv(65_536, 1).describe(
    'The largest payload one ctx.emit may write (as JSON): a larger one throws in the handler, naming this limit (write large outputs with ctx.artifact).',
  ),
  MAX_EVENTS_PER_TASK: intFromEnv(100_000, 1).describe(
    'Events (ctx.emit, ctx.partial) one task may write; the next emit throws in the handler naming this limit.',
  ),
  MAX_EVENT_BYTES_PER_TASK: intFromEnv(67_108_864, 1).describe(
    "All of one task's event payloads together (64 MiB); the emit that would pass it throws in the handler naming this limit.",
  ),
  TASK_EVENT_RETENTION_MS: intFromEnv(0, 0).describe(
    "Task events older than this are deleted by the sweep (a reader asking for them gets 'events gone'); 0 keeps them as long as their task.",
  ),
  MAX_ARTIFACT_BYTES: intFromEnv(17_179_869_184, 1).describe(
    'The largest artifact one ctx.artifact may write (16 GiB): past it the task fails with -32603 naming the artifact, and what it wrote is swept.',
  ),
  ARTIFACT_READ_MAX_BYTES: intFromEnv(8_388_608, 1).describe(
    'The largest artifact resources/read returns inline (text, or base64 blob); a larger one gets -32602 pointing to its HTTP download.',
  ),
  SYNC_CALL_TIMEOUT_MS: intFromEnv(60_000, 1).describe(
    "How long one run of a synchronous tool handler (a call without a task; each MRTR round is a run) may take: past it the call fails with -32603 naming this limit and the handler's ctx.signal fires.",
  ),
  SYNC_CALL_LOOP_BUDGET_US: intFromEnv(1_000).describe(
    'A synchronous tool whose last 50 runs on the threads each took less (µs) runs on the event loop, where the hop costs more than it does; a run there holding the loop 10× past it, or three in a row past it, sends the tool back to the threads for good. 0: every synchronous call on the threads.',
  ),
  SYNC_CALL_THREADS: z
    .union([z.literal('auto'), z.coerce.number().int().min(0)])
    .default('auto')
    .describe(
      'Worker threads that run synchronous tool handlers off the event loop (tools loaded from a module: the shipped ones, --tools, or createServer({toolsModule})). auto: one per core; 0: on the event loop.',
    ),
  RATE_LIMIT_POLLING: boolFromEnv(false).describe(
    '429 for tasks/get polling a task faster than half its pollIntervalMs.',
  ),
  SERVER_NAME: z.string().min(1).default('durable-mcp-tasks').describe('serverInfo.name.'),
  MAX_BODY_BYTES: intFromEnv(1_000_000, 1).describe('Largest request body accepted (413 above).'),
  REQUEST_TIMEOUT_MS: intFromEnv(30_000, 1_000).describe(
    "How long a request's headers and body may take to arrive (408 and the connection closed after; headers within the lesser of this and 10 s). Responses, SSE streams included, are not bounded by it.",
  ),
  ALLOWED_ORIGINS: z
    .string()
    .default('')
    .describe('Comma-separated Origin values accepted besides loopback origins.'),
  TASK_TTL_MS: intFromEnv(3_600_000, 1).describe('Default task time-to-live (a tool may set its own).'),
  TASK_POLL_INTERVAL_MS: intFromEnv(1000, 1).describe('pollIntervalMs suggested to clients.'),
  TASK_PURGE_GRACE_MS: intFromEnv(60_000).describe(
    'How long an expired task stays readable (as failed) before the sweeper deletes it.',
  ),
  SWEEP_INTERVAL_MS: intFromEnv(5_000, 10).describe(
    'How often workers expire and purge tasks past their TTL.',
  ),
  SWEEP_BATCH_SIZE: intFromEnv(500, 1).describe('Tasks expired or purged per sweep statement.'),
  SCHEDULE_POLL_INTERVAL_MS: intFromEnv(1_000).describe(
    'How often this process looks for due schedule ticks (0: it fires none; every process may, each tick still makes one task).',
  ),
  SCHEDULE_MISFIRE_MS: intFromEnv(60_000, 0).describe(
    "A schedule tick more than this late counts as missed (its schedule's catchUp decides) rather than late (it fires).",
  ),
  TASK_RETRY_LIMIT: intFromEnv(2).describe(
    'Retries of a handler that crashed with an unexpected exception, before the task is failed.',
  ),
  TASK_RETRY_DELAY_SECONDS: intFromEnv(1).describe('Delay before a crashed handler is retried.'),
  WORKER_CONCURRENCY: intFromEnv(32, 1).describe(
    'Task runs at once per worker process (legs mostly wait on I/O and on Postgres; their writes are batched).',
  ),
  WORKER_RESERVED_SLOTS: intFromEnv(-1, -1).describe(
    "Slots of each worker kept for light principals' runs (those holding fewer active tasks than this), so that one principal filling the rest cannot starve the others; -1: an eighth of WORKER_CONCURRENCY (at least 1), 0: none.",
  ),
  WORKER_EAGER_START: boolFromEnv(true).describe(
    'A process that serves HTTP and runs workers starts a task it creates on its own idle worker (claimed in the create statement, no queue round trips); false: every task goes through the queue.',
  ),
  WORKER_POLL_INTERVAL_MS: intFromEnv(5_000, 10).describe(
    'Idle workers fetch at once on a NOTIFY; this backstop poll covers lost wake-ups and delayed retries.',
  ),
  CANCEL_CHECK_INTERVAL_MS: intFromEnv(1_000, 10).describe(
    'Backstop re-check of running tasks for cancel requests and lost leases (a NOTIFY makes it immediate).',
  ),
  CANCEL_GRACE_MS: intFromEnv(3_000).describe(
    'Time a cancelled handler has to end after ctx.signal fires; then its task is `cancelled` without it (a later result is discarded) and its leg, still holding a slot, is stuck. 0: cancelled at once.',
  ),
  LEASE_MS: intFromEnv(15_000, 300).describe(
    "A running attempt's lease; renewed every third of it, reclaimable by another worker once it lapses.",
  ),
  SHUTDOWN_GRACE_MS: intFromEnv(10_000).describe(
    'How long graceful shutdown lets running handlers finish before handing their tasks back.',
  ),
  DRAIN_DELAY_MS: intFromEnv(0).describe(
    'On SIGTERM, how long /readyz answers 503 while the process still serves, before it stops accepting (lets a load balancer or Kubernetes take it out of rotation first).',
  ),
  METRICS_PORT: z.coerce
    .number()
    .int()
    .min(0)
    .max(65_535)
    .optional()
    .describe(
      'A listener of its own for the operational endpoints (/healthz, /readyz, /metrics), e.g. for workers, which serve no HTTP otherwise. Unset: none; HTTP instances serve them on PORT as well.',
    ),
  METRICS_TOKEN: z
    .string()
    .min(16)
    .optional()
    .describe(
      'When set, GET /metrics needs `Authorization: Bearer <METRICS_TOKEN>`. Unset: /metrics is open, like /healthz.',
    ),
  DASHBOARD_TOKEN: z
    .string()
    .min(16)
    .optional()
    .describe(
      'Turns on the task dashboard at /dashboard on the HTTP instances; signing in takes this token (16 characters or more: a shorter one is refused at start). Unset: no dashboard (404).',
    ),
  METRICS_STORE_CACHE_MS: intFromEnv(5_000).describe(
    'The cluster-wide gauges (tasks by status, waiting runs) are read from Postgres at most once per this interval.',
  ),
  METRICS_HOST: z
    .string()
    .min(1)
    .optional()
    .describe('Address the METRICS_PORT listener binds. Default: HOST.'),
  STATUS_THROTTLE_MS: intFromEnv(250).describe(
    "Least time between two statusMessage writes of one task (counted from the leg's start too: a short task's only message is written with its completion).",
  ),
  SSE_KEEPALIVE_MS: intFromEnv(15_000, 10).describe(
    'SSE keep-alive comment interval on open streams (subscriptions/listen).',
  ),
  SUBSCRIPTION_POLL_MS: intFromEnv(5_000, 10).describe(
    'How often a subscription re-reads its tasks, in case a change notification was lost.',
  ),
  REQUEST_STATE_SECRET: z
    .string()
    .min(16)
    .optional()
    .describe(
      'Secret that seals MRTR requestState (AES-256-GCM); unset: one generated once and kept in the database.',
    ),
  SESSION_IDLE_TTL_MS: intFromEnv(3_600_000, 1_000).describe(
    'A 2025-11-25 session idle (no request) this long ends; every instance then answers 404 for it.',
  ),
  SESSION_EVENT_RETENTION_MS: intFromEnv(900_000, 1_000).describe(
    "How long a session's stream events stay resumable with Last-Event-ID.",
  ),
  LOG_FORMAT: z
    .enum(['auto', 'json', 'pretty'])
    .default('auto')
    .describe('json lines, pretty (pino-pretty), or auto: pretty when stderr is a terminal, json otherwise.'),
  LOG_LEVEL: z
    .enum(['debug', 'info', 'warn', 'error', 'silent'])
    .default('info')
    .describe('debug, info, warn, error or silent (JSON lines on stderr).'),
});

export type Config = Readonly<z.infer<typeof ConfigSchema>>;

/** Every setting's environment variable, its default (undefined: unset) and what it does: for `--help` and docs. */
export function describeSettings(): Array<{ name: keyof Config; default: unknown; description: string }> {
  const defaults = ConfigSchema.parse({});
  return (Object.keys(ConfigSchema.shape) as Array<keyof Config>).map((name) => ({
    name,
    default: defaults[name],
    description: ConfigSchema.shape[name].description ?? '',
  }));
}

/** The default of every setting, as `loadConfig({})` would give it. */
export function defaultConfig(): Config {
  return loadConfig({});
}

/** Parses the environment once; entry points call this, everything else takes explicit options. */
export function loadConfig(env: Readonly<Record<string, string | undefined>> = process.env): Config {
  // An empty variable (e.g. `FOO=` from a compose file) means unset.
  const set = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = ConfigSchema.safeParse(set);
  if (!parsed.success) {
    // One line a user can act on: each setting that is wrong, and why.
    const issues = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new Error(`Invalid configuration: ${issues.join('; ')}`);
  }
  return Object.freeze(parsed.data);
}

/** `http://HOST:port`, an IPv6 HOST in brackets: where this process listens. */
export function listenOrigin(config: Pick<Config, 'HOST'>, port: number): string {
  const host = config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST;
  return `http://${host}:${port}`;
}

/**
 * The origin the links a server hands out name (signal deliveries, artifact downloads, OAuth metadata):
 * PUBLIC_URL without trailing slashes, or http://HOST:port (port defaults to PORT).
 */
export function publicOrigin(
  config: Pick<Config, 'PUBLIC_URL' | 'HOST' | 'PORT'>,
  port: number = config.PORT,
): string {
  return config.PUBLIC_URL?.replace(/\/+$/, '') ?? listenOrigin(config, port);
}
