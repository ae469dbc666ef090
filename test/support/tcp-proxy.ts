/**
 * A TCP proxy in front of a server that can refuse the next N connections, cut every open one,
 * or degrade the link without closing it: what a network failure, a partition or a server
 * restart looks like to a client.
 *
 *  - `mode`: 'pass' forwards both ways; 'blackhole' drops everything both ways (a partition: the
 *    sockets stay open, nothing arrives); 'half-open' forwards requests but drops every answer
 *    (the server does the work, the client never hears: the outcome of a write is unknown).
 *  - `delayMs`: every chunk is delivered that much later (a slow link; order is kept).
 *  - `listenMode`: the same, for the connections that sent a PostgreSQL `LISTEN` (seen in the
 *    clear-text protocol) only: a replica that stops hearing notifications while its queries work.
 * Bytes dropped while degraded leave those connections unusable: heal with `mode = 'pass'` and
 * `drop()`, as a link that comes back after its peers timed out.
 */
import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

/** What the proxy does to the bytes of a connection. */
export type LinkMode = 'pass' | 'blackhole' | 'half-open';

/** A running proxy. */
export class TcpProxy {
  /** host:port to dial instead of the target. */
  address = '';
  /** How many of the next connections to close at once. */
  refuse = 0;
  /** Connections accepted so far (refused ones included). */
  accepted = 0;
  /** What happens to the bytes of every connection (see the module comment). */
  mode: LinkMode = 'pass';
  /** What happens to the bytes of LISTEN connections (applies on top of `mode`). */
  listenMode: LinkMode = 'pass';
  /** Extra delay of every chunk, ms. */
  delayMs = 0;
  private readonly open = new Set<Socket>();
  private readonly server: Server;

  private constructor(private readonly target: { host: string; port: number }) {
    this.server = createServer((client) => {
      this.accepted += 1;
      if (this.refuse > 0) {
        this.refuse -= 1;
        client.destroy();
        return;
      }
      const upstream = createConnection(this.target);
      const conn = { listen: false };
      const forward = (from: Socket, to: Socket, request: boolean): void => {
        let chain = Promise.resolve();
        from.on('data', (chunk: Buffer) => {
          if (request && !conn.listen && chunk.includes('LISTEN ')) conn.listen = true;
          const modes = conn.listen ? [this.mode, this.listenMode] : [this.mode];
          if (modes.includes('blackhole') || (!request && modes.includes('half-open'))) return;
          const delay = this.delayMs;
          if (delay === 0) {
            chain = chain.then(() => void to.write(chunk));
            return;
          }
          chain = chain.then(() => new Promise<void>((resolve) => setTimeout(() => {
            if (!to.destroyed) to.write(chunk);
            resolve();
          }, delay)));
        });
      };
      forward(client, upstream, true);
      forward(upstream, client, false);
      for (const [a, b] of [[client, upstream], [upstream, client]] as const) {
        this.open.add(a);
        a.on('error', () => b.destroy());
        a.on('close', () => { this.open.delete(a); b.destroy(); });
      }
    });
  }

  /** Starts a proxy to `target` (host:port) on 127.0.0.1:0. */
  static async start(target: string): Promise<TcpProxy> {
    const i = target.lastIndexOf(':');
    const p = new TcpProxy({ host: target.slice(0, i), port: Number(target.slice(i + 1)) });
    await new Promise<void>((resolve) => p.server.listen(0, '127.0.0.1', resolve));
    p.address = `127.0.0.1:${(p.server.address() as AddressInfo).port}`;
    return p;
  }

  /** Cuts every open connection; returns how many sockets were open. */
  drop(): number {
    const n = this.open.size;
    for (const s of this.open) s.destroy();
    this.open.clear();
    return n;
  }

  /** Stops listening and cuts everything. */
  async close(): Promise<void> {
    this.drop();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
