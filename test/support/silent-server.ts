// A TCP server that accepts connections, reads and never answers: a queue service (or any peer) that
// stalls. `sockets` are the connections it took.
import net, { type AddressInfo } from 'node:net';

export async function silentServer(): Promise<{ endpoint: string; sockets: Set<net.Socket>; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => sockets.add(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    sockets,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
