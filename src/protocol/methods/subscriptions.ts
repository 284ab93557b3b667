import { CHANNELS, type ChangeFeed } from '../../events/change-feed.ts';
import { z } from 'zod';
import { coerceError } from '../../log.ts';
import type { MethodHandler, RequestContext } from '../context.ts';
import { missingTasksExtension, ProtocolError, ProtocolErrorCode } from '../../core/errors.ts';
import { PerPrincipalCap } from '../../core/per-principal-cap.ts';
import type { ServerDeps } from '../server-deps.ts';
import { META_SUBSCRIPTION_ID } from '../../core/wire.ts';
import { SubscriptionTasks } from './subscription-tasks.ts';
import { declaresTasks } from './tasks.ts';

const FilterSchema = z
  .object({
    toolsListChanged: z.boolean().optional(),
    promptsListChanged: z.boolean().optional(),
    resourcesListChanged: z.boolean().optional(),
    resourceSubscriptions: z.array(z.string()).max(1000).optional(),
    taskIds: z.array(z.string()).max(1000).optional(),
  })
  .loose();
const ListenParamsSchema = z.object({ notifications: FilterSchema.default({}) }).loose();

const LIST_FLAG = {
  tools: 'toolsListChanged',
  prompts: 'promptsListChanged',
  resources: 'resourcesListChanged',
} as const;

/**
 * subscriptions/listen: an SSE stream that opens with the acknowledgement (the honoured filter), then
 * carries only what the client asked for: list changes, resource updates, and `notifications/tasks` with
 * the full DetailedTask of the principal's own tasks. Changes arrive through the process's LISTEN
 * connection from whichever process made them; a periodic re-read covers lost notifications.
 */
export function subscriptionsListen(deps: ServerDeps): MethodHandler {
  const open = new PerPrincipalCap(
    'MAX_SUBSCRIPTIONS_PER_PRINCIPAL',
    deps.limits.maxSubscriptionsPerPrincipal,
    'open subscriptions',
  );
  return async (ctx: RequestContext) => {
    const { notifications: filter } = ListenParamsSchema.parse(ctx.params);
    if (filter.taskIds !== undefined && !declaresTasks(ctx)) throw missingTasksExtension();
    const feed = deps.feed;
    const notify = ctx.notify;
    if (feed === undefined || notify === undefined) {
      throw new ProtocolError(ProtocolErrorCode.InternalError, 'Subscriptions are not available');
    }
    const release = open.take(ctx.principal);
    try {
      return await listen(deps, ctx, { filter, feed, notify });
    } finally {
      release();
    }
  };
}

type Filter = z.infer<typeof FilterSchema>;
type Notify = NonNullable<RequestContext['notify']>;

/** What the acknowledgement says is honoured, and the resources and tasks that are watched. */
interface Honoured {
  honoured: Record<string, unknown>;
  resourceUris: Set<string>;
  /** Of the asked-for tasks, the principal's own. */
  taskIds: string[];
}

/** The part of the filter this server honours: list changes it can have, resources if any, owned tasks. */
async function honour(deps: ServerDeps, ctx: RequestContext, filter: Filter): Promise<Honoured> {
  const honoured: Record<string, unknown> = {};
  for (const [kind, flag] of Object.entries(LIST_FLAG)) {
    const supported = kind === 'tools' || (kind === 'prompts' ? !deps.prompts.empty : !deps.resources.empty);
    if (filter[flag] === true && supported) honoured[flag] = true;
  }
  const resourceUris = new Set(deps.resources.empty ? [] : (filter.resourceSubscriptions ?? []));
  if (filter.resourceSubscriptions !== undefined && !deps.resources.empty)
    honoured.resourceSubscriptions = [...resourceUris];
  const taskIds = filter.taskIds === undefined ? [] : await deps.tasks.owned(filter.taskIds, ctx.principal);
  if (filter.taskIds !== undefined) honoured.taskIds = taskIds;
  return { honoured, resourceUris, taskIds };
}

/** One ordered queue per stream: notifications never overtake each other or the acknowledgement. */
function orderedQueue(ctx: RequestContext, notify: Notify, meta: Record<string, unknown>) {
  let queue: Promise<void> = Promise.resolve();
  return {
    /** Queues a notification; a failed send is logged, and the ones after it still go. */
    send: (method: string, params: Record<string, unknown> = {}): void => {
      queue = queue
        .then(() => notify({ method, params: { ...params, _meta: meta } }))
        .catch((err: unknown) =>
          ctx.log.debug('subscription send failed', { error: coerceError(err).message }),
        );
    },
    /** Queues a step; its failure is the caller's, and the queue goes on. */
    enqueue: (step: () => Promise<void>): Promise<void> => {
      const run = queue.then(step);
      queue = run.catch(() => {});
      return run;
    },
    /** Settles once everything queued so far has been sent. */
    drained: () => queue,
  };
}

/** Listens on the change feed for what was honoured; returns the listeners' removers. */
function watchFeed(
  feed: ChangeFeed,
  { honoured, resourceUris }: Honoured,
  tasks: SubscriptionTasks,
  send: (method: string, params?: Record<string, unknown>) => void,
): (() => void)[] {
  return [
    feed.on(CHANNELS.list, (kind) => {
      const flag = LIST_FLAG[kind as keyof typeof LIST_FLAG];
      if (flag !== undefined && honoured[flag] === true) send(`notifications/${kind}/list_changed`);
    }),
    feed.on(CHANNELS.resource, (uri) => {
      if (resourceUris.has(uri)) send('notifications/resources/updated', { uri });
    }),
    feed.onResync(() => tasks.refreshAll()),
  ];
}

/** Resolves when the client closes the stream or the process shuts down, whichever comes first. */
async function untilClosed(client: AbortSignal, shutdown: AbortSignal): Promise<void> {
  // Listeners on long-lived signals are removed when the stream ends, or they would pile up.
  const ended = new AbortController();
  try {
    await new Promise<void>((resolve) => {
      if (client.aborted || shutdown.aborted) return resolve();
      client.addEventListener('abort', () => resolve(), { once: true, signal: ended.signal });
      shutdown.addEventListener('abort', () => resolve(), { once: true, signal: ended.signal });
    });
  } finally {
    ended.abort();
  }
}

/** One subscriptions/listen stream, from its acknowledgement to its end. */
async function listen(
  deps: ServerDeps,
  ctx: RequestContext,
  { filter, feed, notify }: { filter: Filter; feed: ChangeFeed; notify: Notify },
) {
  const meta = { [META_SUBSCRIPTION_ID]: ctx.id };
  const honoured = await honour(deps, ctx, filter);
  const queue = orderedQueue(ctx, notify, meta);
  queue.send('notifications/subscriptions/acknowledged', { notifications: honoured.honoured });

  const tasks = new SubscriptionTasks(honoured.taskIds, {
    tasks: deps.tasks,
    taskChanges: deps.taskChanges,
    principal: ctx.principal,
    log: ctx.log,
    enqueue: queue.enqueue,
    notify: (detailed) => notify({ method: 'notifications/tasks', params: { ...detailed, _meta: meta } }),
  });
  const unsubscribe = watchFeed(feed, honoured, tasks, queue.send);
  // The current state first, so that a change just before the subscription is not missed.
  tasks.refreshAll();
  const backstop =
    tasks.size > 0 ? setInterval(() => tasks.refreshAll(), deps.subscriptionPollMs) : undefined;

  try {
    await untilClosed(ctx.signal, deps.shutdown);
  } finally {
    clearInterval(backstop);
    for (const off of unsubscribe) off();
    tasks.close();
  }
  await queue.drained();
  if (ctx.signal.aborted) throw new Error('subscription closed by the client');
  // Shutting down: the graceful end is a result for the listen request.
  return { resultType: 'complete', _meta: meta };
}
