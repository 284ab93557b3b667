/**
 * Named prepared statements for the statements a process runs again and again. Kysely and pg-boss send
 * every query as an unnamed statement, which Postgres parses and plans on every execution: for the hot
 * statements (a claim, a completion, pg-boss's fetch and insert) planning cost more than running them
 * (pg_stat_statements with track_planning, during `npm run bench -- drain`). A named statement is parsed
 * and planned once per connection, and after a few executions Postgres keeps a generic plan.
 *
 * Only a text seen twice is named (a migration's one-off DDL never is), at most MAX_NAMED texts per
 * process (a query whose text varies, e.g. an IN list, cannot fill the server's memory), and only a
 * statement with parameters: pg sends those over the extended protocol already, which refuses several
 * commands in one text, so naming one changes nothing but its reuse.
 *
 * Transaction-mode poolers (PgBouncer before 1.21, or without max_prepared_statements) hand each
 * transaction a different server connection, where the statement does not exist: the process turns
 * naming off when DATABASE_DIRECT_URL says a pooler is in front, and DB_PREPARED_STATEMENTS=off turns it
 * off explicitly. Should a pooler answer that a statement does not exist anyway, naming stops for the
 * process (that one query fails, with its request's error).
 */
import type pg from 'pg';

const MAX_NAMED = 500;
const MAX_COUNTED = 5_000;

/** Postgres refuses a cached plan whose result columns changed (a migration altered the table). */
const RESULT_TYPE_CHANGED = '0A000';
/** What a transaction-mode pooler produces: the statement was prepared on another server connection. */
const POOLER_ERRORS = new Set(['26000', '42P05']);

class StatementNames {
  private readonly names = new Map<string, string>();
  private readonly seen = new Map<string, number>();
  private next = 0;
  enabled = true;

  nameOf(text: string): string | undefined {
    const name = this.names.get(text);
    if (name !== undefined || !this.enabled) return name;
    if (this.names.size >= MAX_NAMED) return undefined;
    if (!this.seen.has(text)) {
      if (this.seen.size >= MAX_COUNTED) this.seen.clear();
      this.seen.set(text, 1);
      return undefined;
    }
    this.seen.delete(text);
    const named = `dmt_${(this.next++).toString(36)}`;
    this.names.set(text, named);
    return named;
  }

  /** After an error from a named statement: re-prepare under a new name, or stop naming altogether. */
  failed(text: string, code: unknown): void {
    if (code === RESULT_TYPE_CHANGED) this.names.set(text, `dmt_${(this.next++).toString(36)}`);
    else if (typeof code === 'string' && POOLER_ERRORS.has(code)) {
      this.enabled = false;
      this.names.clear();
    }
  }
}

/** One table per process: names are unique per connection, and every pool's connections share them. */
export const statementNames = new StatementNames();

type QueryCallback = (err: Error | null, result?: pg.QueryResult) => void;

/**
 * Routes `query(text, values[, callback])` with parameters through a named statement. Every other shape
 * (a config object, a text without parameters, a stream) goes to pg as it came.
 */
export function nameStatements(client: pg.Client): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  (client as { query: unknown }).query = (...args: unknown[]): unknown => {
    const [text, values, callback] = args;
    if (typeof text !== 'string' || !Array.isArray(values) || values.length === 0) return query(...args);
    const name = statementNames.nameOf(text);
    if (name === undefined) return query(...args);
    const config = { name, text, values };
    if (typeof callback === 'function') {
      return query(config, (err: (Error & { code?: unknown }) | null, result?: pg.QueryResult) => {
        if (err !== null) statementNames.failed(text, err.code);
        (callback as QueryCallback)(err, result);
      });
    }
    return (query(config) as Promise<pg.QueryResult>).catch((err: unknown) => {
      statementNames.failed(text, (err as { code?: unknown } | null)?.code);
      throw err;
    });
  };
}
