// Text for the operator's terminal: durations read from the command line, tables, and client-controlled
// text made safe to print.
import { InvalidArgumentError } from 'commander';

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `90s`, `15m`, `2h`, `7d` (or plain milliseconds) in milliseconds. */
export function parseDuration(value: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(value.trim());
  if (m === null) throw new InvalidArgumentError('a duration such as 90s, 15m, 2h or 7d');
  return Math.round(Number(m[1]) * UNITS[m[2] ?? 'ms']!);
}

/**
 * Text a client controls (a status message, an error, a tool name) as the terminal may show it: control
 * characters (C0, DEL, C1, which carry escape sequences such as an OSC 52 clipboard write) and bidi
 * overrides are written as `\u{…}`, never sent raw. `--json` output needs none of this (JSON escapes them).
 */
export function printable(text: string): string {
  return text.replace(
    /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g,
    (ch) => `\\u{${ch.codePointAt(0)!.toString(16)}}`,
  );
}

/** Columns padded to their widest cell; the last column is not padded. Every cell goes through printable. */
export function table(header: string[], rawRows: string[][]): string {
  const rows = rawRows.map((r) => r.map(printable));
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return `${[line(header), ...rows.map(line)].join('\n')}\n`;
}
