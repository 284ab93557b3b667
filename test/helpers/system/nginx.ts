import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from '../ports.ts';
import { ROOT, waitHttp } from './processes.ts';

export interface Nginx {
  port: number;
  /** Its MCP endpoint, `http://127.0.0.1:<port>/mcp`. */
  url: string;
  /** Requests proxied so far, by upstream port (the last one tried, when nginx retried). */
  served(): Map<number, number>;
  stop(): Promise<void>;
}

/** deploy/mcp-locations.conf: the locations docker compose's nginx serves, used here as they are. */
export const MCP_LOCATIONS = path.join(ROOT, 'deploy/mcp-locations.conf');

/**
 * Real nginx, round-robin with no stickiness, in front of the HTTP instances on these ports, proxying
 * with deploy/mcp-locations.conf (the file docker compose uses). Replies carry X-Upstream (the replica);
 * its access log holds the upstream of each request. `listenPort` when the servers must know it first
 * (their PUBLIC_URL).
 */
export async function startNginx(upstreamPorts: readonly number[], listenPort?: number): Promise<Nginx> {
  const port = listenPort ?? (await freePort());
  const dir = mkdtempSync(path.join(tmpdir(), 'mcp-nginx-'));
  // As root, nginx's worker runs as nobody: it must reach the temporary directory to buffer a large body.
  chmodSync(dir, 0o755);
  const accessLog = path.join(dir, 'access.log');
  writeFileSync(
    path.join(dir, 'nginx.conf'),
    `daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
worker_processes 1;
events { worker_connections 1024; }
http {
  log_format upstream '$upstream_addr';
  access_log ${accessLog} upstream;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  upstream mcp {
${upstreamPorts.map((p) => `    server 127.0.0.1:${p} max_fails=1 fail_timeout=1s;`).join('\n')}
    keepalive 16;
  }
  server {
    listen 127.0.0.1:${port};
    # The name of the upstream block above: nginx uses the group, no resolver needed.
    set $mcp_upstream mcp;
    add_header X-Upstream $upstream_addr always;
    include ${MCP_LOCATIONS};
  }
}
`,
  );
  const nginx = spawn('nginx', ['-c', path.join(dir, 'nginx.conf'), '-p', dir], { stdio: 'inherit' });
  await waitHttp(port);
  return {
    port,
    url: `http://127.0.0.1:${port}/mcp`,
    served() {
      const counts = new Map<number, number>(upstreamPorts.map((p) => [p, 0]));
      if (!existsSync(accessLog)) return counts;
      for (const line of readFileSync(accessLog, 'utf8').split('\n')) {
        const last = /:(\d+)\s*$/.exec(line.split(',').at(-1) ?? '');
        if (last === null) continue;
        const p = Number(last[1]);
        counts.set(p, (counts.get(p) ?? 0) + 1);
      }
      return counts;
    },
    async stop() {
      nginx.kill('SIGQUIT');
      if (nginx.exitCode === null) await new Promise((r) => nginx.once('exit', r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
