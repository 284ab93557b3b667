/** How requests are authenticated; every task belongs to the principal its request resolved to. */
export type Authenticator = (authorization: string | undefined) => Promise<AuthResult>;

export type AuthResult =
  | { ok: true; principal: string; scopes?: readonly string[] }
  | {
      ok: false;
      status: 401 | 403;
      error: 'invalid_request' | 'invalid_token' | 'insufficient_scope';
      description: string;
    };

export class AuthConfigError extends Error {
  override readonly name = 'AuthConfigError';
}
