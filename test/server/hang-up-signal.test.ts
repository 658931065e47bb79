/**
 * A client request's hang-up signal (src/server/openai/hang-up.ts): aborted when the client leaves
 * before its answer, also when it left before the signal was asked for; never once answered.
 */
import { createServer, request, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, expect, it } from "vitest";
import { hangUpSignal } from "../../src/server/openai/hang-up.js";

const servers: { close(): void }[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

/** A server whose one request's response is handed to the test; the client hangs up at once if `leave`. */
async function oneResponse(leave: boolean): Promise<ServerResponse> {
  let got!: (res: ServerResponse) => void;
  const response = new Promise<ServerResponse>((resolve) => {
    got = resolve;
  });
  const server = createServer((_req, res) => got(res));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const req = request({ host: "127.0.0.1", port, agent: false });
  req.on("error", () => {});
  req.end();
  const res = await response;
  if (leave) {
    req.destroy();
    await new Promise((resolve) => res.once("close", resolve));
  }
  return res;
}

it("is aborted when the client hung up before the signal was asked for", async () => {
  const res = await oneResponse(true);
  expect(hangUpSignal(res).aborted).toBe(true);
});

it("is aborted by a hang-up after it was asked for, and not by an answer", async () => {
  const res = await oneResponse(false);
  const signal = hangUpSignal(res);
  expect(signal.aborted).toBe(false);
  res.end("ok");
  await new Promise((resolve) => res.once("close", resolve));
  expect(signal.aborted).toBe(false);
  const left = await oneResponse(false);
  const gone = hangUpSignal(left);
  left.socket?.destroy();
  await new Promise((resolve) => left.once("close", resolve));
  expect(gone.aborted).toBe(true);
});
