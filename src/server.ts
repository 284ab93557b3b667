import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { defaultConfig, loadConfig, type Config } from './config.ts';
import { createLogger, type Logger } from './log.ts';
import type { PromptDefinition } from './prompts/define.ts';
import type { ResourceDefinition, ResourceTemplateDefinition } from './resources/define.ts';
import type { ScheduleDefinition } from './launch/schedules/define.ts';
import { startProcess, type ServerProcess } from './process/start.ts';
import type { ToolDefinition } from './tools/define.ts';
import type { TriggerDefinition } from './launch/triggers/define.ts';
import { PACKAGE_VERSION } from './version.ts';
import type { SignalDelivery } from './core/signal-delivery.ts';

/** Every setting by its environment variable's name (`PORT`, `DATABASE_URL`, …); see `durable-mcp-tasks --help`. */
export type Settings = Config;

/** What a process runs: `all` (HTTP + workers), `server` (HTTP only) or `worker` (the worker pool only). */
export type ServerRole = 'all' | 'server' | 'worker';

export interface ServerOptions {
  /** The tools served (and run by the workers). */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each tool has its own argument type
  tools: readonly ToolDefinition<any>[];
  resources?: readonly ResourceDefinition[];
  resourceTemplates?: readonly ResourceTemplateDefinition[];
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each prompt has its own argument type
  prompts?: readonly PromptDefinition<any>[];
  /** Tools called on a clock (defineSchedule): each tick makes one task, however many processes run. */
  schedules?: readonly ScheduleDefinition[];
  /**
   * Webhook triggers (`defineTrigger`): `POST /triggers/{name}` starts a task of one of `tools`, once per
   * delivery. A trigger of a tool not in `tools`, or two of one name, fail `start()` before it connects.
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each trigger has its own body type
  triggers?: readonly TriggerDefinition<any>[];
  /** Default `all`. */
  role?: ServerRole;
  /** Postgres connection string. Default: an embedded Postgres under `settings.EMBEDDED_PG_DIR`. */
  databaseUrl?: string;
  /** Default 3000 (0: any free port; `url` names the one bound). */
  port?: number;
  /** Default `127.0.0.1`. */
  host?: string;
  /** Any other setting; unset ones take their defaults. The environment is read only through `fromEnv()`. */
  settings?: Partial<Settings>;
  /** Default: JSON lines on stderr at `settings.LOG_LEVEL`. */
  logger?: Logger;
  /**
   * The module `tools` come from (a path or file URL of a module that exports them as a `--tools` module
   * does, and starts nothing when imported): synchronous calls then run on worker threads that load it
   * (SYNC_CALL_THREADS), off the event loop that serves every other request. Unset: on the event loop.
   */
  toolsModule?: string | URL;
}

/** A server process: HTTP instance, worker pool or both, on Postgres. */
export interface DurableMcpServer {
  /** Connects (and migrates, unless `MIGRATE_ON_START=false`), then listens and/or starts the workers. */
  start(): Promise<void>;
  /** Stops listening, lets running requests and handlers finish (`SHUTDOWN_GRACE_MS`), then disconnects. */
  stop(): Promise<void>;
  /** `http://host:port/mcp` once started, for roles that serve HTTP. */
  readonly url: string | undefined;
  /** The settings in effect. */
  readonly settings: Settings;
  /**
   * Delivers a task's signal (`ctx.createSignal`) by its token, as `POST /signals/{token}` does: the
   * first delivery wins; later ones say why they were refused. Any started role can deliver.
   */
  deliverSignal(token: string, payload?: unknown): Promise<SignalDelivery>;
}

/** The settings of `env` (default `process.env`): what `durable-mcp-tasks` reads; throws naming every invalid one. */
export function fromEnv(env: Readonly<Record<string, string | undefined>> = process.env): Settings {
  return loadConfig(env);
}

// Typed `unknown` here so that the public declarations never reach the internals' types (pg, pg-boss).
const PROCESSES = new WeakMap<DurableMcpServer, () => unknown>();

/** The running process behind a server (a `ServerProcess`): for `durable-mcp-tasks/testing` only. */
export function processOf(server: DurableMcpServer): unknown {
  return PROCESSES.get(server)?.();
}

/** A module's file URL, from a URL or a path (relative to the working directory). */
function moduleUrl(module: string | URL): string {
  if (module instanceof URL) return module.href;
  return module.startsWith('file:') ? module : pathToFileURL(path.resolve(module)).href;
}

/**
 * Builds a server from tools, resources and prompts. Nothing connects before `start()`.
 *
 * ```ts
 * const server = createServer({ tools: [myTool], databaseUrl: process.env.DATABASE_URL });
 * await server.start();
 * ```
 */
export function createServer(options: ServerOptions): DurableMcpServer {
  const settings: Settings = Object.freeze({
    ...defaultConfig(),
    ...options.settings,
    ...(options.databaseUrl !== undefined && { DATABASE_URL: options.databaseUrl }),
    ...(options.port !== undefined && { PORT: options.port }),
    ...(options.host !== undefined && { HOST: options.host }),
  });
  const log = options.logger ?? createLogger(settings.LOG_LEVEL, {}, { format: settings.LOG_FORMAT });
  let running: ServerProcess | undefined;
  let starting: Promise<void> | undefined;
  const server: DurableMcpServer = {
    settings,
    get url() {
      return running?.url;
    },
    start() {
      starting ??= startProcess({
        config: settings,
        log,
        role: options.role ?? 'all',
        tools: options.tools as readonly ToolDefinition[],
        resources: options.resources,
        resourceTemplates: options.resourceTemplates,
        prompts: options.prompts,
        schedules: options.schedules,
        triggers: options.triggers,
        serverVersion: PACKAGE_VERSION,
        toolsModule: options.toolsModule === undefined ? undefined : moduleUrl(options.toolsModule),
      }).then((started) => {
        running = started;
      });
      return starting;
    },
    async deliverSignal(token, payload = null) {
      if (running === undefined) throw new Error('deliverSignal: start() the server first');
      return running.deliverSignal(token, payload);
    },
    async stop() {
      if (starting === undefined) return;
      await starting.catch(() => {});
      await running?.stop();
      running = undefined;
      starting = undefined;
    },
  };
  PROCESSES.set(server, () => running);
  return server;
}
