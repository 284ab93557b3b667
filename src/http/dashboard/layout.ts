// The page frame (header, sign-out form) and the sign-in page.
import { html } from 'hono/html';
import { BASE, type Html } from './format.ts';

/** Who is looking: the sign-in's CSRF token (for every form) and who acts (shown in the header). */
export interface Viewer {
  csrf: string;
  actor: string;
}

/**
 * A page refreshes itself every `refreshSeconds`; one with a `script` (which then keeps it current) only
 * when scripts do not run.
 */
export interface PageOptions {
  refreshSeconds?: number | undefined;
  script?: Html | undefined;
}

function refreshOf({ refreshSeconds, script }: PageOptions): Html | '' {
  if (refreshSeconds === undefined) return '';
  const refresh = html`<meta http-equiv="refresh" content="${refreshSeconds}" />`;
  return script === undefined ? refresh : html`<noscript>${refresh}</noscript>`;
}

export function layout(title: string, body: Html, viewer: Viewer, page: PageOptions = {}): Html {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        ${refreshOf(page)}
        <title>${title} · durable-mcp-tasks</title>
        <link rel="stylesheet" href="${BASE}/style.css" />
      </head>
      <body>
        <header>
          <a class="brand" href="${BASE}">durable-mcp-tasks</a>
          <nav><a href="${BASE}">Tasks</a> <a href="${BASE}/schedules">Schedules</a></nav>
          <span class="who">${viewer.actor}</span>
          <form method="post" action="${BASE}/logout">
            <input type="hidden" name="csrf" value="${viewer.csrf}" /><button class="link">Sign out</button>
          </form>
        </header>
        <main>${body}</main>
        ${page.script ?? ''}
      </body>
    </html>`;
}

export function loginPage(error?: string): Html {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <title>Sign in · durable-mcp-tasks</title>
        <link rel="stylesheet" href="${BASE}/style.css" />
      </head>
      <body class="login">
        <main>
          <h1>durable-mcp-tasks</h1>
          <form method="post" action="${BASE}/login">
            <label
              >Dashboard token
              <input type="password" name="token" autocomplete="current-password" autofocus required
            /></label>
            <label
              >Your name <span class="muted">(optional: the audit trail says who acted)</span>
              <input name="operator" autocomplete="username" maxlength="64"
            /></label>
            ${error === undefined ? '' : html`<p class="error" role="alert">${error}</p>`}
            <button>Sign in</button>
          </form>
        </main>
      </body>
    </html>`;
}
