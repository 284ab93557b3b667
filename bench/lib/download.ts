// An artifact's download as a client makes it: GET, the body read to its end and hashed. In a worker thread
// when the bench process times something else meanwhile, so that neither waits on the other's event loop.
import { createHash } from 'node:crypto';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

export interface Download {
  bytes: number;
  /** Hex SHA-256 of the body. */
  sha256: string;
  /** From the request sent to the body's last byte. */
  ms: number;
}

export async function download(url: string): Promise<Download> {
  const started = performance.now();
  const res = await fetch(url);
  if (res.status !== 200 || res.body === null) throw new Error(`GET ${url}: HTTP ${res.status}`);
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const piece of res.body) {
    hash.update(piece);
    bytes += piece.length;
  }
  return { bytes, sha256: hash.digest('hex'), ms: performance.now() - started };
}

/** `download(url)` in a worker thread of its own; `onStart` once the thread is up and sends its request. */
export function downloadInThread(url: string, onStart: () => void = () => {}): Promise<Download> {
  const thread = new Worker(new URL(import.meta.url), { workerData: { url } });
  return new Promise<Download>((resolve, reject) => {
    thread.on('message', (m: Download | 'start') => (m === 'start' ? onStart() : resolve(m)));
    thread.once('error', reject);
    thread.once('exit', (code) =>
      reject(new Error(`the download thread exited (${code}) without an answer`)),
    );
  }).finally(() => thread.terminate());
}

if (!isMainThread && typeof (workerData as { url?: unknown } | null)?.url === 'string') {
  parentPort!.postMessage('start');
  parentPort!.postMessage(await download((workerData as { url: string }).url));
}
