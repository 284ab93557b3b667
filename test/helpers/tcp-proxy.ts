// A TCP proxy in front of a server, whose connections a test cuts: a connection dropped mid-stream, the
// way a network or a load balancer drops it, with the server still up.
import { connect, createServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

export interface TcpProxy {
  /** `url` with its host and port replaced by the proxy's. */
  url: string;
  /** Destroys every open connection (both sides); returns how many there were. */
  cut(): number;
  /** Sends new connections to the host and port of `url` (open ones stay where they are). */
  retarget(url: string): void;
  close(): Promise<void>;
}

/** Listens on 127.0.0.1 and forwards each connection to the host and port of `url`. */
export async function startTcpProxy(url: string): Promise<TcpProxy> {
  let target = new URL(url);
  const pairs = new Set<[Socket, Socket]>();
  const server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    const drop = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const proxied = new URL(url);
  proxied.host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  const cut = () => {
    const open = [...pairs];
    for (const [client, upstream] of open) {
      client.destroy();
      upstream.destroy();
    }
    pairs.clear();
    return open.length;
  };
  return {
    url: proxied.toString(),
    cut,
    retarget(to) {
      target = new URL(to);
    },
    async close() {
      cut();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
