import { z } from 'zod';

const intFromEnv = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);
const boolFromEnv = (def: boolean) =>
  z
    .enum(['true', 'false', '1', '0'])
    .default(def ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1');

/** Every setting the server and the worker pool read from the environment, with its default. */
const ConfigSchema = z.object({
  HOST: z.string().min(1).default('127.0.0.1'),
  PORT: intFromEnv(3000),
  /** Postgres connection string. Unset: an embedded Postgres is started under EMBEDDED_PG_DIR. */
  DATABASE_URL: z.string().min(1).optional(),
  /** A direct (unpooled) connection to the same database, for what a transaction-mode pooler such as
   * PgBouncer cannot carry: the LISTEN connection and migrations. Default: DATABASE_URL. */
  DATABASE_DIRECT_URL: z.string().min(1).optional(),
  /** Migrate (our schema and pg-boss's) when a process starts. Set false when processes run as a role
   * that may not run DDL, and run `npm run migrate` as the owner role instead. */
  MIGRATE_ON_START: boolFromEnv(true),
  /** For `npm run migrate` run as the owner: the runtime role to grant what the server and workers need. */
  DB_APP_ROLE: z.string().min(1).optional(),
  EMBEDDED_PG_DIR: z.string().min(1).default('.data/postgres'),
  EMBEDDED_PG_PORT: intFromEnv(54329, 1),
  DB_POOL_MAX: intFromEnv(10, 1),
  /** How long a query waits for a connection before it fails (-32603), e.g. while Postgres restarts. */
  DB_CONNECT_TIMEOUT_MS: intFromEnv(5_000, 100),
  /** How long a starting process waits for an unreachable database (e.g. restarting) before it gives up. */
  DB_STARTUP_TIMEOUT_MS: intFromEnv(60_000, 0),
  /** Server-side timeouts of every pooled session (0: off): a stuck query or a client that died
   * inside a transaction cannot hold locks forever. */
  DB_STATEMENT_TIMEOUT_MS: intFromEnv(30_000),
  DB_LOCK_TIMEOUT_MS: intFromEnv(10_000),
  DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: intFromEnv(60_000),
  /** pg-boss's own pool (fetching and sending run jobs). */
  QUEUE_POOL_MAX: intFromEnv(3, 1),
  /** none (loopback HOST only: every request is PRINCIPAL), bearer (AUTH_TOKENS), oauth (JWT via JWKS). */
  AUTH_MODE: z.enum(['none', 'bearer', 'oauth']).default('none'),
  /** The principal of every request when AUTH_MODE=none. */
  PRINCIPAL: z.string().min(1).default('local'),
  /** bearer: `principal=<sha256 hex of the token>`, comma-separated; several per principal allowed. */
  AUTH_TOKENS: z.string().default(''),
  OAUTH_ISSUER: z.string().url().optional(),
  /** The audience access tokens must carry: this server's resource identifier. Default: PUBLIC_URL/mcp. */
  OAUTH_AUDIENCE: z.string().min(1).optional(),
  OAUTH_JWKS_URL: z.string().url().optional(),
  /** A claim that qualifies the subject (principal = `<tenant>/<sub>`). */
  OAUTH_TENANT_CLAIM: z.string().min(1).optional(),
  /** Space-separated scopes every request needs. */
  OAUTH_REQUIRED_SCOPES: z.string().default(''),
  /** The server's public base URL (behind TLS termination); default http://HOST:PORT. */
  PUBLIC_URL: z.string().url().optional(),
  /** Comma-separated Host names accepted (DNS-rebinding protection); default: loopback names when HOST is loopback. */
  ALLOWED_HOSTS: z.string().default(''),
  MAX_JSON_DEPTH: intFromEnv(64, 1),
  MAX_ARGUMENTS_BYTES: intFromEnv(262_144, 1),
  MAX_INPUT_RESPONSES_BYTES: intFromEnv(65_536, 1),
  /** Open subscriptions/listen streams per principal on one instance (429 above). */
  MAX_SUBSCRIPTIONS_PER_PRINCIPAL: intFromEnv(32, 1),
  /** A tool result larger than this is not stored: the task fails with -32603 instead. */
  MAX_RESULT_BYTES: intFromEnv(1_048_576, 1),
  /** 429 for tasks/get polling a task faster than half its pollIntervalMs. */
  RATE_LIMIT_POLLING: boolFromEnv(false),
  SERVER_NAME: z.string().min(1).default('durable-mcp-tasks'),
  MAX_BODY_BYTES: intFromEnv(1_000_000, 1),
  /** Comma-separated Origin values accepted besides loopback origins. */
  ALLOWED_ORIGINS: z.string().default(''),
  TASK_TTL_MS: intFromEnv(3_600_000, 1),
  TASK_POLL_INTERVAL_MS: intFromEnv(1000, 1),
  /** How long an expired task stays readable (as failed) before the sweeper deletes it. */
  TASK_PURGE_GRACE_MS: intFromEnv(60_000),
  SWEEP_INTERVAL_MS: intFromEnv(5_000, 10),
  SWEEP_BATCH_SIZE: intFromEnv(500, 1),
  /** Retries of a handler that crashed with an unexpected exception, before the task is failed. */
  TASK_RETRY_LIMIT: intFromEnv(2),
  TASK_RETRY_DELAY_SECONDS: intFromEnv(1),
  WORKER_CONCURRENCY: intFromEnv(4, 1),
  /** Idle workers fetch at once on a NOTIFY; this backstop poll covers lost wake-ups and delayed retries. */
  WORKER_POLL_INTERVAL_MS: intFromEnv(5_000, 10),
  /** Backstop re-check of running tasks for cancel requests and lost leases (a NOTIFY makes it immediate). */
  CANCEL_CHECK_INTERVAL_MS: intFromEnv(1_000, 10),
  /** A running attempt's lease; renewed every third of it, reclaimable by another worker once it lapses. */
  LEASE_MS: intFromEnv(15_000, 300),
  /** How long graceful shutdown lets running handlers finish before handing their tasks back. */
  SHUTDOWN_GRACE_MS: intFromEnv(10_000),
  STATUS_THROTTLE_MS: intFromEnv(250),
  /** SSE keep-alive comment interval on open streams (subscriptions/listen). */
  SSE_KEEPALIVE_MS: intFromEnv(15_000, 10),
  /** How often a subscription re-reads its tasks, in case a change notification was lost. */
  SUBSCRIPTION_POLL_MS: intFromEnv(5_000, 10),
  /** Secret for the integrity protection of MRTR requestState; unset: one generated once and kept in the database. */
  REQUEST_STATE_SECRET: z.string().min(16).optional(),
  /** A 2025-11-25 session idle (no request) this long ends; every instance then answers 404 for it. */
  SESSION_IDLE_TTL_MS: intFromEnv(3_600_000, 1_000),
  /** How long a session's stream events stay resumable with Last-Event-ID. */
  SESSION_EVENT_RETENTION_MS: intFromEnv(900_000, 1_000),
  LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info'),
});

export type Config = Readonly<z.infer<typeof ConfigSchema>>;

/** Parses the environment once; entry points call this, everything else takes explicit options. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable (e.g. `FOO=` from a compose file) means unset.
  const set = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = ConfigSchema.safeParse(set);
  if (!parsed.success) {
    throw new Error(`Invalid configuration:\n${z.prettifyError(parsed.error)}`);
  }
  return Object.freeze(parsed.data);
}
