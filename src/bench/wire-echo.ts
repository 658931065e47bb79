/**
 * The "wire" baseline of the router-overhead benchmark: a bare WebSocket echo (TLS with the cluster's
 * certificates when WIRE_TLS_DIR is set, else plain TCP) in its own process. A round trip to it is what
 * any peer hop pays on this machine before a router does anything: two cross-process wake-ups, TLS,
 * and `ws` framing, no parsing. Prints its URL on stdout, runs until killed.
 */
import { createServer as createHttp } from "node:http";
import { createServer as createHttps } from "node:https";
import { WebSocketServer } from "ws";
import { loadTlsMaterial, serverTlsOptions } from "../net/auth/tls.js";

const dir = process.env.WIRE_TLS_DIR;
const server = dir ? createHttps(serverTlsOptions(await loadTlsMaterial(dir, "E"))) : createHttp();
const wss = new WebSocketServer({ server, perMessageDeflate: false });
// A reply the size of a forward's answer frame (a chunk and the final result), which the bench encodes.
const replyBytes = Number(process.env.WIRE_REPLY_BYTES);
if (!(Number.isInteger(replyBytes) && replyBytes > 0))
  throw new Error("WIRE_REPLY_BYTES: the answer frame's size");
const reply = Buffer.alloc(replyBytes, 0x20);
wss.on("connection", (ws) => ws.on("message", () => ws.send(reply, { binary: true })));
server.listen(0, "127.0.0.1", () => {
  const a = server.address() as import("node:net").AddressInfo;
  process.stdout.write(`${dir ? "wss" : "ws"}://127.0.0.1:${a.port}\n`);
});
