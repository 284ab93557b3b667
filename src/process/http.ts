import { TaskEventFeed } from '../tasks/event-feed.ts';
import { TaskEventReader } from '../tasks/event-follower.ts';
import type { ServerType } from '@hono/node-server';
import type { Hono } from 'hono';
import { listenOrigin, publicOrigin, type Config } from '../config.ts';
import { signalPath } from '../core/signal-delivery.ts';
import { isUnreachable } from '../db/wait.ts';
import type { ChangeFeed } from '../events/change-feed.ts';
import type { ServerEvents } from '../events/server-events.ts';
import { createApp, type AppOptions } from '../http/app.ts';
import { securityFromConfig } from '../http/auth/from-config.ts';
import type { AuthEnv } from '../http/auth/middleware.ts';
import { guardNodeServer } from '../http/node-server.ts';
import type { Logger } from '../log.ts';
import { createDispatcher } from '../protocol/dispatch.ts';
import { PollLimiter } from '../protocol/poll-limiter.ts';
import type { ServerDeps } from '../protocol/server-deps.ts';
import type { PromptDefinition } from '../prompts/define.ts';
import { PromptRegistry } from '../prompts/registry.ts';
import type { ResourceDefinition, ResourceTemplateDefinition } from '../resources/define.ts';
import { ResourceRegistry } from '../resources/registry.ts';
import { artifactResourceTemplate } from '../protocol/artifact-resource.ts';
import { ArtifactReader } from '../tasks/artifacts.ts';
import { TaskChanges } from '../tasks/changes.ts';
import type { TaskQueue } from '../queue/task-queue.ts';
import type { TaskService } from '../tasks/service.ts';
import type { ToolRegistry } from '../tools/registry.ts';
import type { TriggerRegistry } from '../launch/triggers/registry.ts';
import { startTriggeredTask } from '../launch/triggers/start.ts';
import { RequestStateSealer } from '../tools/request-state.ts';
import type { SyncCallRunner } from '../tools/sync-runner.ts';
import type { CleanupStack } from './cleanups.ts';
import type { DatabaseConnection } from './database.ts';
import { closeServer, listen, type ClosableServer } from './listener.ts';
import type { Operational } from './operational.ts';
import { DISCOVERED_VERSIONS, revisionTransports } from './revisions.ts';

/** The LISTEN connection's application_name, `:role` appended: instances that serve HTTP find each other by it. */
export const LISTENER_NAME = 'durable-mcp-tasks:listen';

export interface McpEndpointParts {
  conn: DatabaseConnection;
  config: Config;
  log: Logger;
  tools: ToolRegistry;
  /** The webhook triggers served at `POST /triggers/{name}` (none: every name is 404). */
  triggers: TriggerRegistry;
  resources?: readonly ResourceDefinition[] | undefined;
  resourceTemplates?: readonly ResourceTemplateDefinition[] | undefined;
  prompts?: readonly PromptDefinition[] | undefined;
  /** The process's task service (its eager starts use this process's workers). */
  tasks: TaskService;
  /** The run queue: the dashboard's resume and fork queue a task's run. */
  queue: TaskQueue;
  events: ServerEvents;
  feed: ChangeFeed;
  operational: Operational;
  requestStateSecret: string;
  /** Where synchronous handlers run off the event loop, if anywhere. */
  syncCalls?: SyncCallRunner | undefined;
  serverVersion?: string | undefined;
  /** An artifact's HTTP download URL (the public origin's, once known). */
  artifactUrl: (taskId: string, name: string) => string;
  /** Bind HOST:PORT; false builds the app only (tests drive it in process). */
  listen: boolean;
}

export interface McpEndpoint {
  app: Hono<AuthEnv>;
  server: ServerType | undefined;
  /** `http://host:port/mcp` once listening. */
  url: string | undefined;
}

/** The MCP endpoint (every protocol revision), the dashboard and the probes, bound to HOST:PORT. */
export async function serveMcp(parts: McpEndpointParts, cleanups: CleanupStack): Promise<McpEndpoint> {
  const { config, log, conn } = parts;
  const shutdown = new AbortController();
  const taskChanges = new TaskChanges(conn.db, parts.feed, { log, metrics: parts.operational.metrics });
  cleanups.push(async () => taskChanges.stop());
  const eventFeed = new TaskEventFeed(conn.db, parts.feed, {
    log,
    metrics: parts.operational.metrics,
    pollMs: config.SUBSCRIPTION_POLL_MS,
  });
  cleanups.push(async () => eventFeed.stop());
  const taskEvents = new TaskEventReader(
    { db: conn.db, eventFeed, taskChanges },
    { maxStreamsPerPrincipal: config.MAX_EVENT_STREAMS_PER_PRINCIPAL },
  );
  const artifacts = new ArtifactReader(conn.db, conn.pool);
  const deps = methodDeps(parts, { taskChanges, taskEvents, artifacts, shutdown: shutdown.signal });
  // Refuse unsafe settings (e.g. no authentication on a public address) before binding anything.
  securityFromConfig(config, config.PORT);
  const revisions = revisionTransports({
    config,
    db: conn.db,
    feed: parts.feed,
    deps,
    dispatcher: createDispatcher(deps),
    servingListeners: [`${LISTENER_NAME}:all`, `${LISTENER_NAME}:server`],
  });
  const events = { reader: taskEvents, tasks: parts.tasks, shutdown: shutdown.signal };
  const buildApp = (port: number) => createApp(appOptions(parts, { port, revisions, artifacts, events }));
  const app = buildApp(config.PORT);
  if (!parts.listen) return { app, server: undefined, url: undefined };
  return bind(parts, app, buildApp, shutdown, cleanups);
}

/** What the shared method handlers are built on: registries, the task service, limits. */
function methodDeps(
  parts: McpEndpointParts,
  own: {
    taskChanges: TaskChanges;
    taskEvents: TaskEventReader;
    artifacts: ArtifactReader;
    shutdown: AbortSignal;
  },
): ServerDeps {
  const { config } = parts;
  const metrics = parts.operational.metrics;
  // Every task's artifacts, readable by their task's principal: listed after the server's own templates.
  const artifactTemplate = artifactResourceTemplate({
    artifacts: own.artifacts,
    maxBytes: config.ARTIFACT_READ_MAX_BYTES,
    downloadUrl: parts.artifactUrl,
    metrics,
  });
  return {
    serverInfo: { name: config.SERVER_NAME, version: parts.serverVersion ?? '0.1.0' },
    supportedVersions: DISCOVERED_VERSIONS,
    tools: parts.tools,
    resources: new ResourceRegistry(parts.resources, [...(parts.resourceTemplates ?? []), artifactTemplate]),
    prompts: new PromptRegistry(parts.prompts),
    tasks: parts.tasks,
    taskChanges: own.taskChanges,
    taskEvents: own.taskEvents,
    requestState: new RequestStateSealer(parts.requestStateSecret),
    events: parts.events,
    feed: parts.feed,
    shutdown: own.shutdown,
    taskDefaults: { ttlMs: config.TASK_TTL_MS, pollIntervalMs: config.TASK_POLL_INTERVAL_MS },
    listTtlMs: 60_000,
    subscriptionPollMs: config.SUBSCRIPTION_POLL_MS,
    limits: {
      maxArgumentsBytes: config.MAX_ARGUMENTS_BYTES,
      maxInputResponsesBytes: config.MAX_INPUT_RESPONSES_BYTES,
      maxSubscriptionsPerPrincipal: config.MAX_SUBSCRIPTIONS_PER_PRINCIPAL,
      maxSteeringMessageBytes: config.MAX_STEERING_MESSAGE_BYTES,
      maxSteeringMessagesPerTask: config.MAX_STEERING_MESSAGES_PER_TASK,
      syncCallTimeoutMs: config.SYNC_CALL_TIMEOUT_MS,
    },
    syncCalls: parts.syncCalls,
    pollLimiter: config.RATE_LIMIT_POLLING ? new PollLimiter() : undefined,
    metrics,
  };
}

/** The app's options for the port it serves (the OAuth metadata names it). */
function appOptions(
  parts: McpEndpointParts,
  {
    port,
    revisions,
    artifacts,
    events,
  }: {
    port: number;
    revisions: AppOptions['revisions'];
    artifacts: ArtifactReader;
    events: AppOptions['taskEvents'];
  },
): AppOptions {
  const { config, log } = parts;
  const security = securityFromConfig(config, port);
  // As the worker names them: PUBLIC_URL, else this endpoint's own origin (the port it serves).
  const origin = publicOrigin(config, port);
  return {
    revisions,
    log,
    auth: security.auth,
    resourceMetadata: security.resourceMetadata,
    allowedHosts: security.allowedHosts,
    allowedOrigins: config.ALLOWED_ORIGINS.split(',')
      .map((o) => o.trim())
      .filter((o) => o !== ''),
    maxBodyBytes: config.MAX_BODY_BYTES,
    maxJsonDepth: config.MAX_JSON_DEPTH,
    keepAliveMs: config.SSE_KEEPALIVE_MS,
    signals: {
      deliver: (token, payload) => parts.tasks.deliverSignal(token, payload),
      maxBytes: config.MAX_SIGNAL_BYTES,
    },
    triggers: {
      triggers: parts.triggers,
      start: (trigger, body, headers) =>
        startTriggeredTask(
          {
            tasks: parts.tasks,
            tools: parts.tools,
            defaults: { ttlMs: config.TASK_TTL_MS, pollIntervalMs: config.TASK_POLL_INTERVAL_MS },
            maxArgumentsBytes: config.MAX_ARGUMENTS_BYTES,
          },
          trigger,
          body,
          headers,
        ),
      maxBytes: config.TRIGGER_MAX_BODY_BYTES,
    },
    operational: parts.operational,
    artifacts: { artifacts, metrics: parts.operational.metrics },
    taskEvents: events,
    isDatabaseUnavailable: isUnreachable,
    dashboard:
      config.DASHBOARD_TOKEN === undefined
        ? undefined
        : {
            token: config.DASHBOARD_TOKEN,
            db: parts.conn.db,
            queue: parts.queue,
            tools: parts.tools.list().map((t) => t.name),
            signalUrl: (token) => `${origin}${signalPath(token)}`,
            log,
          },
  };
}

/**
 * Binds HOST:PORT; with PORT=0 the app is built again for the port actually bound (the public URL in
 * the OAuth metadata names it). Its stop: accept nothing more, end subscriptions gracefully, let
 * requests in flight finish before the database goes away.
 */
async function bind(
  { config, log }: McpEndpointParts,
  first: Hono<AuthEnv>,
  buildApp: (port: number) => Hono<AuthEnv>,
  shutdown: AbortController,
  cleanups: CleanupStack,
): Promise<McpEndpoint> {
  let app = first;
  const listening = await listen(
    (req) => app.fetch(req),
    config.HOST,
    config.PORT,
    'PORT (or --port)',
    // Before any connection: an oversized request's 413 must reach a client still sending the body.
    // (A trigger's body may be larger than an MCP request's.)
    (s) =>
      guardNodeServer(s, { maxBodyBytes: Math.max(config.MAX_BODY_BYTES, config.TRIGGER_MAX_BODY_BYTES) }),
    config.REQUEST_TIMEOUT_MS,
  );
  if (listening.port !== config.PORT) app = buildApp(listening.port);
  const url = `${listenOrigin(config, listening.port)}/mcp`;
  const server = listening.server;
  cleanups.push(() => closeServer(server as unknown as ClosableServer, shutdown, config.SHUTDOWN_GRACE_MS));
  log.info('listening', {
    url,
    ...(config.DASHBOARD_TOKEN === undefined ? {} : { dashboard: new URL('/dashboard', url).href }),
  });
  return { app, server, url };
}
