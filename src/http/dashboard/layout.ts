// The page frame (header, sign-out form) and the sign-in page.
import { html } from 'hono/html';
import { BASE, type Html } from './format.ts';

export function layout(title: string, body: Html, csrf: string, refreshSeconds?: number): Html {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        ${refreshSeconds === undefined ? '' : html`<meta http-equiv="refresh" content="${refreshSeconds}" />`}
        <title>${title} · durable-mcp-tasks</title>
        <link rel="stylesheet" href="${BASE}/style.css" />
      </head>
      <body>
        <header>
          <a class="brand" href="${BASE}">durable-mcp-tasks</a>
          <nav><a href="${BASE}">Tasks</a></nav>
          <form method="post" action="${BASE}/logout">
            <input type="hidden" name="csrf" value="${csrf}" /><button class="link">Sign out</button>
          </form>
        </header>
        <main>${body}</main>
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
            ${error === undefined ? '' : html`<p class="error" role="alert">${error}</p>`}
            <button>Sign in</button>
          </form>
        </main>
      </body>
    </html>`;
}
