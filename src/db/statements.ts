import { CompiledQuery } from 'kysely';

/** One SQL statement and its parameters, numbered from `$1`. */
export interface Statement {
  readonly text: string;
  readonly values: readonly unknown[];
  /** Embedded by `withStatements`: a column of this statement's row to return beside the main one's, under its name. */
  readonly keep?: string | undefined;
}

const PLACEHOLDER = /\$(\d+)(?!\d)/g;

/**
 * `statement`'s placeholders, `$1`… moved up by `offset` (to sit after another statement's). Only for
 * texts without dollar-quoted strings or `$` in literals, which `embeddable` checks.
 */
function shifted(statement: Statement, offset: number): string {
  return statement.text.replace(PLACEHOLDER, (_, n: string) => `$${Number(n) + offset}`);
}

/**
 * Whether a statement from elsewhere (pg-boss's SQL) can be embedded as a CTE: a single INSERT, UPDATE,
 * DELETE or SELECT whose only `$` are its placeholders $1…$n, for its n values.
 */
export function embeddable(statement: Statement): boolean {
  const { text, values } = statement;
  if (!/^\s*(insert|update|delete|select)\b/i.test(text) || text.includes(';')) return false;
  const dollars = text.split('$').length - 1;
  const placeholders = [...text.matchAll(PLACEHOLDER)].map((m) => Number(m[1]));
  return (
    dollars === placeholders.length &&
    placeholders.every((n) => n >= 1 && n <= values.length) &&
    new Set(placeholders).size === values.length
  );
}

/**
 * One statement that runs `main` and, as CTEs of the same statement (so in its implicit transaction,
 * in one round trip), each of `also`; it returns `main`'s rows (and the columns `also` keep). Each of
 * `also` must produce at least one row, or the whole statement fails (division by zero: see
 * `isStatementRefused`) and nothing of it is written.
 */
export function withStatements<Row>(
  main: CompiledQuery<Row>,
  also: readonly Statement[],
): CompiledQuery<Row> {
  const values: unknown[] = [...main.parameters];
  const ctes = [`main as (${main.sql})`];
  const checks: string[] = [];
  also.forEach((s, i) => {
    ctes.push(`also_${i} as (${shifted(s, values.length)})`);
    values.push(...s.values);
    checks.push(`1 / (select count(*)::int from also_${i}) as also_${i}`);
    if (s.keep !== undefined) checks.push(`(select ${s.keep} from also_${i} limit 1) as ${s.keep}`);
  });
  const select = ['main.*', ...checks].join(', ');
  return CompiledQuery.raw(`with ${ctes.join(', ')} select ${select} from main`, values);
}

/** The error of a `withStatements` statement one of whose parts produced no row (nothing was written). */
export function isStatementRefused(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === '22012';
}
