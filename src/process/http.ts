import { serve, type ServerType } from '@hono/node-server';
import type { Hono } from 'hono';
import type { Config } from '../config.ts';
import { isUnreachable } from '../db/wait.ts';
import type { ChangeFeed } from '../events/change-feed.ts';
import type { ServerEvents } from '../events/server-events.ts';
import { PerPrincipalCap } from '../core/per-principal-cap.ts';
import { createApp } from '../http/app.ts';
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
import { createSessionTransport, SessionService } from '../rev2025-11-25/index.ts';
import { TaskChanges } from '../tasks/changes.ts';
import type { TaskQueue } from '../queue/task-queue.ts';
import type { TaskService } from '../tasks/service.ts';
import type { ToolRegistry } from '../tools/registry.ts';
import { RequestStateSealer } from '../tools/request-state.ts';
import type { SyncCallRunner } from '../tools/sync-runner.ts';
import type { CleanupStack } from './cleanups.ts';
import type { DatabaseConnection } from './database.ts';
import type { Operational } from './operational.ts';

/** The LISTEN connection's application_name, `:role` appended: instances that serve HTTP find each other by it. */
export const LISTENER_NAME = 'durable-mcp-tasks:listen';

export interface McpEndpointParts {
  conn: DatabaseConnection;
  config: Config;
  log: Logger;
  tools: ToolRegistry;
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

/** The MCP endpoint (both protocol eras), the dashboard and the probes, bound to HOST:PORT. */
export async function serveMcp(parts: McpEndpointParts, cleanups: CleanupStack): Promise<McpEndpoint> {
  const { config, log, conn } = parts;
  const { db } = conn;
  const shutdown = new AbortController();
  const taskChanges = new TaskChanges(db, parts.feed, { log, metrics: parts.operational.metrics });
  cleanups.push(async () => taskChanges.stop());
  const artifacts = new ArtifactReader(db, conn.pool);
  // Every task's artifacts, readable by their task's principal: listed after the server's own templates.
  const artifactTemplate = artifactResourceTemplate({
    artifacts,
    maxBytes: config.ARTIFACT_READ_MAX_BYTES,
    downloadUrl: parts.artifactUrl,
    metrics: parts.operational.metrics,
  });
  const deps: ServerDeps = {
    serverInfo: { name: config.SERVER_NAME, version: parts.serverVersion ?? '0.1.0' },
    tools: parts.tools,
    resources: new ResourceRegistry(parts.resources, [...(parts.resourceTemplates ?? []), artifactTemplate]),
    prompts: new PromptRegistry(parts.prompts),
    tasks: parts.tasks,
    taskChanges,
    requestState: new RequestStateSealer(parts.requestStateSecret),
    events: parts.events,
    feed: parts.feed,
    shutdown: shutdown.signal,
    taskDefaults: { ttlMs: config.TASK_TTL_MS, pollIntervalMs: config.TASK_POLL_INTERVAL_MS },
    listTtlMs: 60_000,
    subscriptionPollMs: config.SUBSCRIPTION_POLL_MS,
    limits: {
      maxArgumentsBytes: config.MAX_ARGUMENTS_BYTES,
      maxInputResponsesBytes: config.MAX_INPUT_RESPONSES_BYTES,
      maxSubscriptionsPerPrincipal: config.MAX_SUBSCRIPTIONS_PER_PRINCIPAL,
      syncCallTimeoutMs: config.SYNC_CALL_TIMEOUT_MS,
    },
    syncCalls: parts.syncCalls,
    pollLimiter: config.RATE_LIMIT_POLLING ? new PollLimiter() : undefined,
    metrics: parts.operational.metrics,
  };
  // Refuse unsafe settings (e.g. no authentication on a public address) before binding anything.
  securityFromConfig(config, config.PORT);
  const dispatcher = createDispatcher(deps);
  const sessions = new SessionService(db, {
    idleTtlMs: config.SESSION_IDLE_TTL_MS,
    feed: parts.feed,
    servingListeners: [`${LISTENER_NAME}:all`, `${LISTENER_NAME}:server`],
    maxSessionsPerPrincipal: config.MAX_SESSIONS_PER_PRINCIPAL,
  });
  const sessionCaps = {
    getStreams: new PerPrincipalCap(
      'MAX_GET_STREAMS_PER_PRINCIPAL',
      config.MAX_GET_STREAMS_PER_PRINCIPAL,
      'open GET streams',
    ),
    resultWaits: new PerPrincipalCap(
      'MAX_RESULT_WAITS_PER_PRINCIPAL',
      config.MAX_RESULT_WAITS_PER_PRINCIPAL,
      'tasks/result waits',
    ),
  };
  const buildApp = (port: number) => {
    const security = securityFromConfig(config, port);
    return createApp({
      dispatcher,
      log,
      auth: security.auth,
      resourceMetadata: security.resourceMetadata,
      allowedHosts: security.allowedHosts,
      maxBodyBytes: config.MAX_BODY_BYTES,
      maxJsonDepth: config.MAX_JSON_DEPTH,
      keepAliveMs: config.SSE_KEEPALIVE_MS,
      signals: {
        deliver: (token, payload) => parts.tasks.deliverSignal(token, payload),
        maxBytes: config.MAX_SIGNAL_BYTES,
      },
      operational: parts.operational,
      artifacts: { artifacts, metrics: parts.operational.metrics },
      isDatabaseUnavailable: isUnreachable,
      dashboard:
        config.DASHBOARD_TOKEN === undefined
          ? undefined
          : {
              token: config.DASHBOARD_TOKEN,
              db,
              queue: parts.queue,
              tools: parts.tools.list().map((t) => t.name),
              log,
            },
      sessions: (binding) =>
        createSessionTransport({
          ...binding,
          db,
          dispatcher,
          sessions,
          tasks: deps.tasks,
          taskChanges,
          tools: parts.tools,
          serverInfo: deps.serverInfo,
          serves: { resources: !deps.resources.empty, prompts: !deps.prompts.empty },
          feed: parts.feed,
          shutdown: shutdown.signal,
          requestorsIdentified: config.AUTH_MODE !== 'none',
          maxInputResponsesBytes: config.MAX_INPUT_RESPONSES_BYTES,
          maxSessionMetadataBytes: config.MAX_SESSION_METADATA_BYTES,
          caps: sessionCaps,
          backstopMs: config.SUBSCRIPTION_POLL_MS,
          metrics: parts.operational.metrics,
        }),
      allowedOrigins: config.ALLOWED_ORIGINS.split(',')
        .map((o) => o.trim())
        .filter((o) => o !== ''),
    });
  };
  let app = buildApp(config.PORT);
  if (!parts.listen) return { app, server: undefined, url: undefined };
  let current = app;
  const listening = await listen(
    (req) => current.fetch(req),
    config.HOST,
    config.PORT,
    'PORT (or --port)',
    // Before any connection: an oversized request's 413 must reach a client still sending the body.
    (s) => guardNodeServer(s, { maxBodyBytes: config.MAX_BODY_BYTES }),
    config.REQUEST_TIMEOUT_MS,
  );
  // The public URL (OAuth metadata) names the port actually bound, e.g. with PORT=0.
  if (listening.port !== config.PORT) app = current = buildApp(listening.port);
  const host = config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST;
  const url = `http://${host}:${listening.port}/mcp`;
  const server = listening.server;
  // Stop accepting first; requests in flight finish before the database goes away. Open
  // subscriptions are ended first, with their graceful result.
  cleanups.push(() => closeServer(server as unknown as ClosableServer, shutdown, config.SHUTDOWN_GRACE_MS));
  log.info('listening', {
    url,
    ...(config.DASHBOARD_TOKEN === undefined ? {} : { dashboard: new URL('/dashboard', url).href }),
  });
  return { app, server, url };
}

/** How long the server keeps an idle keep-alive connection open (see listen). */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;

/**
 * Binds an HTTP server; a port that cannot be bound (taken, or not allowed) is one clear error naming the
 * setting, not an unhandled 'error' event.
 */
export function listen(
  fetch: (req: Request) => Response | Promise<Response>,
  hostname: string,
  port: number,
  setting: string,
  prepare?: (server: ServerType) => void,
  requestTimeoutMs = 30_000,
): Promise<{ server: ServerType; port: number }> {
  return new Promise((resolve, reject) => {
    const serverOptions = {
      // A request must arrive whole (headers and body) within this; a response may stream for as long as
      // it needs (an SSE stream). Checked every second, so that a slow body is not held on for long after.
      requestTimeout: requestTimeoutMs,
      headersTimeout: Math.min(10_000, requestTimeoutMs),
      connectionsCheckingInterval: 1_000,
      // An idle keep-alive connection stays open longer than the clients and proxies in front keep theirs
      // (nginx's upstream keepalive_timeout is 60 s, load balancers' idle timeouts 60 s): the side that
      // closes an idle connection must be the client's, or a request it sends just then meets a reset.
      keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    };
    const server = serve({ fetch, hostname, port, serverOptions }, (info) => {
      server.off('error', refused);
      resolve({ server, port: info.port });
    });
    const refused = (err: NodeJS.ErrnoException) => {
      server.close();
      const why =
        err.code === 'EADDRINUSE' ? 'is already in use' : `cannot be bound (${err.code ?? err.message})`;
      reject(new Error(`${hostname}:${port} ${why}: choose another with ${setting}`));
    };
    server.once('error', refused);
    prepare?.(server);
  });
}

interface ClosableServer {
  close(cb: () => void): void;
  closeIdleConnections(): void;
  closeAllConnections(): void;
}

/** Closes a listener and every connection on it at once (the probes' port). */
export function closeNow(server: ServerType): Promise<void> {
  return new Promise<void>((resolve) => {
    server.close(() => resolve());
    (server as unknown as ClosableServer).closeAllConnections();
  });
}

/**
 * Stops accepting connections, ends subscriptions (they send their graceful result), closes each
 * keep-alive connection as soon as it is idle, and after `graceMs` closes whatever is left.
 */
async function closeServer(
  server: ClosableServer,
  shutdown: AbortController,
  graceMs: number,
): Promise<void> {
  shutdown.abort();
  await new Promise<void>((resolve) => {
    const idle = setInterval(() => server.closeIdleConnections(), 50);
    const force = setTimeout(() => server.closeAllConnections(), graceMs);
    server.close(() => {
      clearInterval(idle);
      clearTimeout(force);
      resolve();
    });
    server.closeIdleConnections();
  });
}
