/** A raw TCP connection to a node's port, for tests of what the server does with connections. */
import { connect, type Socket } from "node:net";

/**
 * A raw connection to `url`'s port on 127.0.0.1, recording when the server closed it. `allowHalfOpen`:
 * the client does not hang up when the server does (only the server's cut ends the connection).
 */
export async function rawConnection(
  url: string,
  allowHalfOpen = false,
): Promise<{ socket: Socket; closed: () => boolean }> {
  let closed = false;
  const socket = await new Promise<Socket>((ok, fail) => {
    const s = connect({ port: Number(new URL(url).port), host: "127.0.0.1", allowHalfOpen }, () => ok(s));
    s.once("error", fail);
  });
  socket.on("error", () => {});
  socket.once("close", () => {
    closed = true;
  });
  return { socket, closed: () => closed };
}
