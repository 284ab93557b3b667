import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import path from 'node:path';

/** What a client keeps of a task it created, so that it can find the task again after it restarts. */
export interface TaskRecord {
  taskId: string;
  /** The endpoint the task lives on. */
  serverUrl: string;
  tool: string;
  /** The arguments, shortened for display (never more than a line). */
  argumentsSummary: string;
  /** When the task was created (ISO 8601). */
  createdAt: string;
  /** The last status seen, and when (ISO 8601). */
  status: string;
  statusMessage?: string | undefined;
  checkedAt: string;
  /** The task's TTL from its creation, in ms; `null` for none, absent when the server did not say. */
  ttlMs?: number | null | undefined;
  /** The input requests this client answered: never answered twice, across restarts too. */
  answeredKeys: string[];
  /** When the outcome was shown: the record goes once the task's TTL has passed too (ISO 8601). */
  shownAt?: string | undefined;
}

/**
 * Where a client keeps its task records. Two are built in (`FileTaskStore`, `MemoryTaskStore`); a host
 * can keep them in its own database by implementing these four methods. `save` must be durable when it
 * resolves: the client relies on a record written before it tells anyone the task exists.
 */
export interface TaskIdStore {
  /** Writes the record whole (insert or replace). */
  save(record: TaskRecord): Promise<void>;
  load(serverUrl: string, taskId: string): Promise<TaskRecord | undefined>;
  /** Every record, or those of one endpoint; newest first. */
  list(serverUrl?: string): Promise<TaskRecord[]>;
  /** Removes the record, and the task's event cursor with it. */
  remove(serverUrl: string, taskId: string): Promise<void>;
  /**
   * The `seq` of the last task event the host processed (`TasksClient.events`), kept apart from the
   * record (written once per event, never racing a record's save). Optional: a store without it keeps
   * no cursor, and an iterator starts where its `after` says.
   */
  eventCursor?(serverUrl: string, taskId: string): Promise<number | undefined>;
  /** Saves the cursor; it need not be durable against a machine crash (events are then seen again). */
  saveEventCursor?(serverUrl: string, taskId: string, seq: number): Promise<void>;
}

/** @deprecated use TaskIdStore (the same interface; "task store" names the server's SQL). */
export type TaskStore = TaskIdStore;

const newestFirst = (a: TaskRecord, b: TaskRecord) => b.createdAt.localeCompare(a.createdAt);

/** Records in this process's memory: for tests, and hosts that only need `pending()` while they run. */
export class MemoryTaskStore implements TaskIdStore {
  readonly #records = new Map<string, TaskRecord>();
  readonly #cursors = new Map<string, number>();

  async save(record: TaskRecord): Promise<void> {
    this.#records.set(keyOf(record.serverUrl, record.taskId), structuredClone(record));
  }
  async load(serverUrl: string, taskId: string): Promise<TaskRecord | undefined> {
    const record = this.#records.get(keyOf(serverUrl, taskId));
    return record === undefined ? undefined : structuredClone(record);
  }
  async list(serverUrl?: string): Promise<TaskRecord[]> {
    return [...this.#records.values()]
      .filter((r) => serverUrl === undefined || r.serverUrl === serverUrl)
      .map((r) => structuredClone(r))
      .sort(newestFirst);
  }
  async remove(serverUrl: string, taskId: string): Promise<void> {
    this.#records.delete(keyOf(serverUrl, taskId));
    this.#cursors.delete(keyOf(serverUrl, taskId));
  }
  async eventCursor(serverUrl: string, taskId: string): Promise<number | undefined> {
    return this.#cursors.get(keyOf(serverUrl, taskId));
  }
  async saveEventCursor(serverUrl: string, taskId: string, seq: number): Promise<void> {
    this.#cursors.set(keyOf(serverUrl, taskId), seq);
  }
}

const keyOf = (serverUrl: string, taskId: string) => `${serverUrl}\n${taskId}`;

/** The default state folder: `$XDG_STATE_HOME/durable-mcp-tasks`, else `~/.local/state/durable-mcp-tasks`. */
export function defaultStateDir(env: Record<string, string | undefined> = process.env): string {
  const base =
    env.XDG_STATE_HOME !== undefined && path.isAbsolute(env.XDG_STATE_HOME)
      ? env.XDG_STATE_HOME
      : path.join(homedir(), '.local', 'state');
  return path.join(base, 'durable-mcp-tasks');
}

/**
 * One JSON file per task in a folder (mode 0700, files 0600), each written to a temporary file and
 * renamed over the old one: a record is whole or absent, and processes sharing the folder (two
 * terminals) never overwrite each other's tasks. A task's event cursor is a file of its own beside
 * the record (`.cursor`), written the same way but not flushed to disk: it is written once per event,
 * and after a machine crash the worst is events seen again (a cursor lost is one never saved).
 */
export class FileTaskStore implements TaskIdStore {
  readonly dir: string;

  constructor(dir: string = defaultStateDir()) {
    this.dir = path.join(dir, 'tasks');
  }

  async save(record: TaskRecord): Promise<void> {
    const file = this.#fileOf(record.serverUrl, record.taskId);
    await this.#write(file, `${JSON.stringify(record, null, 2)}\n`, true);
  }

  async load(serverUrl: string, taskId: string): Promise<TaskRecord | undefined> {
    return readRecord(this.#fileOf(serverUrl, taskId));
  }

  async list(serverUrl?: string): Promise<TaskRecord[]> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
    const prefix = serverUrl === undefined ? '' : `${digest(serverUrl)}-`;
    const files = names.filter((n) => n.endsWith('.json') && n.startsWith(prefix));
    const records = await Promise.all(files.map((n) => readRecord(path.join(this.dir, n))));
    return records.filter((r): r is TaskRecord => r !== undefined).sort(newestFirst);
  }

  async remove(serverUrl: string, taskId: string): Promise<void> {
    await rm(this.#fileOf(serverUrl, taskId), { force: true });
    await rm(this.#fileOf(serverUrl, taskId, 'cursor'), { force: true });
  }

  async eventCursor(serverUrl: string, taskId: string): Promise<number | undefined> {
    const value = (await readJson(this.#fileOf(serverUrl, taskId, 'cursor'))) as
      { seq?: unknown } | undefined;
    return Number.isSafeInteger(value?.seq) ? (value?.seq as number) : undefined;
  }

  async saveEventCursor(serverUrl: string, taskId: string, seq: number): Promise<void> {
    await this.#write(this.#fileOf(serverUrl, taskId, 'cursor'), `${JSON.stringify({ seq })}\n`, false);
  }

  /** Writes a temporary file (flushed to disk when `flush`) and renames it over `file`. */
  async #write(file: string, text: string, flush: boolean): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const temp = `${file}.${process.pid}.${++temporaries}.tmp`;
    await writeFile(temp, text, { mode: 0o600, flush });
    await rename(temp, file);
  }

  #fileOf(serverUrl: string, taskId: string, ext: 'json' | 'cursor' = 'json'): string {
    return path.join(this.dir, `${digest(serverUrl)}-${digest(taskId)}.${ext}`);
  }
}

/** Numbers this process's temporary files: two writes in one millisecond never share one. */
let temporaries = 0;

const digest = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 16);

/** A file's JSON, or undefined when it is missing or not JSON (a half-written file never is). */
async function readJson(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** A record file, or undefined when it is missing or not a record. */
async function readRecord(file: string): Promise<TaskRecord | undefined> {
  const value = (await readJson(file)) as Partial<TaskRecord> | undefined;
  return typeof value?.taskId === 'string' && typeof value.serverUrl === 'string'
    ? ({ answeredKeys: [], ...value } as TaskRecord)
    : undefined;
}
