// A TCP proxy the chaos harness owns, in front of one member's cluster or leaf listener, so
// a network partition is a thing the harness does rather than asks the kernel for.
//
// Which servers a connection joins is read from the NATS handshake itself, so the proxy
// knows a connection's two ends within its first few hundred bytes: both ends of a route
// send INFO with their `server_name`, while on a leafnode connection only the accepting
// member sends INFO and the dialling leaf names itself in its CONNECT's `name` (nats-server
// sendLeafConnect). Read as `server_name` alone, a leaf was never recognised and cut_leaf
// cut nothing (issue 11: its slow "failovers" were the leaf's own rebalancing, two seats a
// sweep). A route CONNECT's `name` is a server ID, never a node id. Cutting a node closes every
// connection (on every proxy of the harness) that names it, and closes any new one the
// moment its handshake names it, until the cut is healed. Members advertise the proxies'
// ports (stream.cluster.advertise, stream.leaf.advertise), so gossip never hands out a
// listener behind a proxy and nothing routes around a cut.
import { createServer, connect, type Server, type Socket } from "node:net";

/** The handshake's INFO lines come first and are small; a name not seen in this many bytes
 * of a direction is not coming. Bounds what the proxy inspects per connection. */
const SNIFF_BYTES_MAX = 16 * 1024;
const SERVER_NAME = /"(?:server_)?name":"([^"]+)"/g;

interface Link {
  client: Socket;
  upstream: Socket;
  names: Set<string>;
  sniffed: [number, number];
}

/** The harness's partitions: which node ids are cut off from everyone. Shared by its proxies. */
export class Partitions {
  private readonly cut = new Set<string>();
  private readonly proxies = new Set<TcpProxy>();

  register(p: TcpProxy): void {
    this.proxies.add(p);
  }

  isCut(names: Iterable<string>): boolean {
    for (const n of names) if (this.cut.has(n)) return true;
    return false;
  }

  /** Cuts `node` off: its connections through every proxy close now and at every retry. */
  cutOff(node: string): number {
    this.cut.add(node);
    let closed = 0;
    for (const p of this.proxies) closed += p.enforce();
    return closed;
  }

  heal(node: string): void {
    this.cut.delete(node);
  }

  healAll(): void {
    this.cut.clear();
  }

  get active(): string[] {
    return [...this.cut];
  }
}

export class TcpProxy {
  private server: Server | null = null;
  private readonly links = new Set<Link>();
  port = 0;

  constructor(
    private readonly targetPort: number,
    private readonly partitions: Partitions,
    /** The node behind this proxy: every connection through it has it as one end. */
    private readonly behind: string,
  ) {
    partitions.register(this);
  }

  async listen(port: number): Promise<number> {
    const server = createServer((client) => this.accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => resolve());
    });
    this.server = server;
    this.port = port;
    return port;
  }

  private accept(client: Socket): void {
    const link: Link = { client, upstream: connect(this.targetPort, "127.0.0.1"), names: new Set([this.behind]), sniffed: [0, 0] };
    if (this.partitions.isCut(link.names)) {
      client.destroy();
      link.upstream.destroy();
      return;
    }
    this.links.add(link);
    const end = () => {
      this.links.delete(link);
      client.destroy();
      link.upstream.destroy();
    };
    const sniff = (dir: 0 | 1) => (chunk: Buffer) => {
      if (link.sniffed[dir] >= SNIFF_BYTES_MAX) return;
      link.sniffed[dir] += chunk.length;
      for (const m of chunk.toString("latin1").matchAll(SERVER_NAME)) link.names.add(m[1]!);
      if (this.partitions.isCut(link.names)) end();
    };
    client.on("data", sniff(0));
    link.upstream.on("data", sniff(1));
    client.pipe(link.upstream);
    link.upstream.pipe(client);
    client.on("error", end);
    link.upstream.on("error", end);
    client.on("close", end);
    link.upstream.on("close", end);
  }

  /** Closes the connections a cut now covers; how many. */
  enforce(): number {
    let closed = 0;
    for (const link of [...this.links]) {
      if (!this.partitions.isCut(link.names)) continue;
      this.links.delete(link);
      link.client.destroy();
      link.upstream.destroy();
      closed++;
    }
    return closed;
  }

  get open(): number {
    return this.links.size;
  }

  async close(): Promise<void> {
    for (const link of this.links) {
      link.client.destroy();
      link.upstream.destroy();
    }
    this.links.clear();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
