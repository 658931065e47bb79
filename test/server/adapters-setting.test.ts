/** `--adapters`: a bounded list of names, refused for the embedded engine (it cannot run adapters). */
import pino from "pino";
import { expect, it } from "vitest";
import { startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";

const base = {
  id: "A",
  listen: "127.0.0.1:0",
  peerListen: "127.0.0.1:0",
  insecure: true,
  logLevel: "silent",
};

it("takes a comma-separated list of names and refuses a malformed one", () => {
  expect(resolveNodeSettings({ ...base, engine: "sim", adapters: "sql-lora,chat-lora" }, {}).adapters).toBe(
    "sql-lora,chat-lora",
  );
  for (const bad of ["", "a,,b", "has space", Array.from({ length: 65 }, (_, i) => `a${i}`).join(",")])
    expect(() => resolveNodeSettings({ ...base, engine: "sim", adapters: bad }, {})).toThrow(/adapters/);
});

it("refuses adapters on the embedded llama.cpp engine before loading anything", async () => {
  const s = resolveNodeSettings({ ...base, engine: "llamacpp", adapters: "sql-lora" }, {});
  await expect(startNode(s, { logger: pino({ level: "silent" }) })).rejects.toThrow(/--adapters needs/);
});
