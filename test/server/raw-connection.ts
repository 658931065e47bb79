/** A raw TCP connection to a node's port, for tests of what the server does with connections. */
import { connect, type Socket } from "node:net";

/** A raw connection to `url`'s port on 127.0.0.1, recording when the server closed it. */
export async function rawConnection(url: string): Promise<{ socket: Socket; closed: () => boolean }> {
  let closed = false;
  const socket = await new Promise<Socket>((ok, fail) => {
    const s = connect(Number(new URL(url).port), "127.0.0.1", () => ok(s));
    s.once("error", fail);
  });
  socket.on("error", () => {});
  socket.once("close", () => {
    closed = true;
  });
  return { socket, closed: () => closed };
}
