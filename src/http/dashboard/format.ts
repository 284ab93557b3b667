// Small pieces every dashboard page uses: times, status badges, cut text.
import { html } from 'hono/html';
import type { HtmlEscapedString } from 'hono/utils/html';

/** The dashboard's mount point: every link and form names it. */
export const BASE = '/dashboard';

export type Html = HtmlEscapedString | Promise<HtmlEscapedString>;

export const iso = (d: Date | null | undefined) =>
  d
    ? d
        .toISOString()
        .replace('T', ' ')
        .replace(/\.\d+Z$/, 'Z')
    : '';

export function ago(d: Date, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - d.getTime()) / 1000));
  if (s < 90) return `${s} s ago`;
  if (s < 90 * 60) return `${Math.round(s / 60)} min ago`;
  if (s < 36 * 3600) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

export const badge = (status: string) =>
  html`<span class="badge ${status}">${status.replace('_', ' ')}</span>`;

/**
 * Client-controlled text is shown cut (a status message may be 250 kB: 40 of them made a 40 MB list):
 * this much in the list, this much on a task's page.
 */
export const LIST_TEXT_CHARS = 200;
export const PAGE_TEXT_CHARS = 4_000;

export const truncate = (s: string, max: number) =>
  s.length <= max ? s : `${s.slice(0, max)}\n… (${s.length - max} more characters)`;
