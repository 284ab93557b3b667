// Who may use the dashboard, and how a form proves it came from the dashboard's own page. Sign-in with
// DASHBOARD_TOKEN (and, optionally, the operator's name, which the audit trail records) sets an HttpOnly,
// SameSite=Strict cookie: a random value per sign-in, kept (hashed) in Postgres so that every instance
// behind a round-robin load balancer knows it, deleted at sign-out. A request with the token itself
// (Authorization: Bearer) needs no cookie. Every POST carries the sign-in's own CSRF token and must come
// from the dashboard's own origin.
import { createHmac } from 'node:crypto';
import type { Context, Handler, MiddlewareHandler } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import type { Logger } from '../../log.ts';
import {
  closeDashboardSignIn,
  DASHBOARD_SIGN_IN_MS,
  openDashboardSignIn,
  readDashboardSignIn,
} from '../../tasks/store/dashboard-sign-ins.ts';
import { bearerToken, sameSecret } from '../auth/secret.ts';
import { BASE } from './format.ts';
import { loginPage } from './layout.ts';

const COOKIE = 'durable_mcp_dashboard';

/**
 * What a signed-in request carries: the CSRF token its forms must send back, and who acts for the audit
 * trail (`dashboard:<name>`, or `dashboard` without a name or with the bearer token).
 */
export type Env = { Variables: { csrf: string; actor: string } };

/** The longest operator name a sign-in takes. */
export const MAX_OPERATOR_CHARS = 64;

/**
 * The operator's name as given at sign-in: trimmed, null when empty, undefined when it is not a name
 * (over 64 characters, or anything but letters, marks, digits, punctuation, symbols and spaces).
 */
export function operatorName(value: unknown): string | null | undefined {
  if (value === undefined) return null;
  if (typeof value !== 'string') return undefined;
  const name = value.trim();
  if (name === '') return null;
  if ([...name].length > MAX_OPERATOR_CHARS) return undefined;
  return /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]+$/u.test(name) ? name : undefined;
}

const actorOf = (operator: string | null) => (operator === null ? 'dashboard' : `dashboard:${operator}`);

export interface SignInOptions {
  /** The admin credential (DASHBOARD_TOKEN). */
  token: string;
  db: Parameters<typeof openDashboardSignIn>[0];
  log: Logger;
}

const derive = (token: string, purpose: string) =>
  createHmac('sha256', token).update(purpose).digest('base64url');

/** Whether the request's own scheme is https (directly, or as a proxy in front says). */
function isHttps(c: Context): boolean {
  const proto = c.req.header('x-forwarded-proto')?.split(',')[0]?.trim();
  return (proto ?? new URL(c.req.url).protocol.slice(0, -1)) === 'https';
}

/**
 * Whether a form's Origin is this site: its host against the Host the request came with (a proxy's
 * X-Forwarded-Host first). A proxy that passes the host name without the port (nginx's `$host`) is
 * compared by name. The scheme is not compared: TLS often ends at the proxy.
 */
function sameSite(c: Context, origin: string): boolean {
  let o: URL;
  try {
    o = new URL(origin);
  } catch {
    return false;
  }
  const host =
    c.req.header('x-forwarded-host')?.split(',')[0]?.trim() ??
    c.req.header('host') ??
    new URL(c.req.url).host;
  return host.includes(':') && !host.startsWith('[')
    ? o.host === host
    : o.hostname === host || o.host === host;
}

/** No script, nothing fetched but the dashboard's stylesheet; `more` adds sources (a live task page's script). */
export const contentSecurityPolicy = (more = '') =>
  `default-src 'none'; style-src 'self'; img-src 'self' data:; ${more === '' ? '' : `${more}; `}form-action 'self'; frame-ancestors 'none'; base-uri 'none'`;

const SECURITY_HEADERS = {
  'Content-Security-Policy': contentSecurityPolicy(),
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  // Not no-referrer: with it, browsers send `Origin: null` on form posts, which the origin check refuses.
  'Referrer-Policy': 'same-origin',
  'Cache-Control': 'no-store',
};

/** Every response gets the strict CSP and its companions (unless a route set its own). */
export const securityHeaders: MiddlewareHandler = async (c, next) => {
  await next();
  for (const [k, v] of Object.entries(SECURITY_HEADERS)) if (!c.res.headers.has(k)) c.res.headers.set(k, v);
};

/** Forms post only from the dashboard's own pages (and SameSite=Strict keeps the cookie off other sites'). */
export const sameOriginForms: MiddlewareHandler = async (c, next) => {
  if (c.req.method !== 'POST') return next();
  const origin = c.req.header('origin');
  if (origin !== undefined && !sameSite(c, origin)) return c.text('Forbidden: cross-origin form', 403);
  return next();
};

/** POST /login: the token against DASHBOARD_TOKEN; a new sign-in, with the operator's name, and its cookie. */
export function signIn(opts: SignInOptions): Handler {
  return async (c) => {
    const form = await c.req.parseBody();
    if (typeof form.token !== 'string' || !sameSecret(form.token, opts.token)) {
      opts.log.warn('dashboard sign-in refused');
      return c.html(loginPage('That token is not the dashboard token.'), 401);
    }
    const operator = operatorName(form.operator);
    if (operator === undefined) {
      return c.html(
        loginPage(
          `Your name: at most ${MAX_OPERATOR_CHARS} printable characters (letters, digits, punctuation).`,
        ),
        400,
      );
    }
    const { token } = await openDashboardSignIn(opts.db, operator);
    setCookie(c, COOKIE, token, {
      path: BASE,
      httpOnly: true,
      sameSite: 'Strict',
      secure: isHttps(c),
      maxAge: DASHBOARD_SIGN_IN_MS / 1000,
    });
    return c.redirect(`${BASE}`, 303);
  };
}

/** POST /logout: the cookie is worthless from now on, on every instance. */
export function signOut(opts: SignInOptions): Handler<Env> {
  return async (c) => {
    const cookie = getCookie(c, COOKIE);
    if (cookie !== undefined) await closeDashboardSignIn(opts.db, cookie);
    deleteCookie(c, COOKIE, { path: BASE });
    return c.redirect(`${BASE}/login`, 303);
  };
}

/** Lets a signed-in request through with its CSRF token; a GET without one goes to the sign-in page. */
export function signedIn(opts: SignInOptions): MiddlewareHandler<Env> {
  // A request with the token itself (Authorization: Bearer) has no ambient credential a form could ride.
  const bearerCsrf = derive(opts.token, 'durable-mcp-tasks dashboard form');
  return async (c, next) => {
    if (sameSecret(bearerToken(c.req.header('authorization')), opts.token)) {
      c.set('csrf', bearerCsrf);
      c.set('actor', actorOf(null));
      return next();
    }
    const cookie = getCookie(c, COOKIE);
    const live = cookie === undefined ? undefined : await readDashboardSignIn(opts.db, cookie);
    if (live !== undefined) {
      c.set('csrf', live.csrf);
      c.set('actor', actorOf(live.operator));
      return next();
    }
    if (c.req.method === 'GET') return c.redirect(`${BASE}/login`, 303);
    return c.text('Unauthorized', 401);
  };
}

/** A form must send back the sign-in's own CSRF token. */
export const formChecked: MiddlewareHandler<Env> = async (c, next) => {
  const form = await c.req.parseBody();
  if (typeof form.csrf !== 'string' || !sameSecret(form.csrf, c.get('csrf')))
    return c.text('Forbidden: stale form', 403);
  return next();
};
