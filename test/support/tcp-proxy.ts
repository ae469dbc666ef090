/**
 * A TCP proxy in front of a server that can refuse the next N connections or cut every open one:
 * what a network failure or a server restart looks like to a client.
 */
import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

/** A running proxy. */
export class TcpProxy {
  /** host:port to dial instead of the target. */
  address = '';
  /** How many of the next connections to close at once. */
  refuse = 0;
  /** Connections accepted so far (refused ones included). */
  accepted = 0;
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
      for (const [a, b] of [[client, upstream], [upstream, client]] as const) {
        this.open.add(a);
        a.on('error', () => b.destroy());
        a.on('close', () => { this.open.delete(a); b.destroy(); });
        a.pipe(b);
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
