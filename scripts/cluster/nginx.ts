import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from '../../test/helpers/ports.ts';
import { waitHttp } from './processes.ts';

export interface Nginx {
  port: number;
  url: string;
  stop(): Promise<void>;
}

/** Real nginx, round-robin with no stickiness, in front of the HTTP instances on these ports. */
export async function startNginx(upstreamPorts: readonly number[]): Promise<Nginx> {
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'mcp-nginx-'));
  writeFileSync(
    path.join(dir, 'nginx.conf'),
    `daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
worker_processes 1;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  upstream mcp {
${upstreamPorts.map((p) => `    server 127.0.0.1:${p} max_fails=1 fail_timeout=1s;`).join('\n')}
    keepalive 16;
  }
  server {
    listen 127.0.0.1:${port};
    location /mcp {
      proxy_pass http://mcp;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      # Keep the client's Host: the instances check it (DNS-rebinding protection).
      proxy_set_header Host $host;
      proxy_buffering off;
      proxy_read_timeout 60s;
      proxy_next_upstream error timeout;
      add_header X-Upstream $upstream_addr always;
    }
  }
}
`,
  );
  const nginx = spawn('nginx', ['-c', path.join(dir, 'nginx.conf'), '-p', dir], { stdio: 'inherit' });
  await waitHttp(port);
  return {
    port,
    url: `http://127.0.0.1:${port}/mcp`,
    async stop() {
      nginx.kill('SIGQUIT');
      if (nginx.exitCode === null) await new Promise((r) => nginx.once('exit', r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
