import { describe, expect, it } from "vitest";
import { waitFor } from "../e2e/helpers.js";
import { soloNode } from "./helpers.js";

describe("stop() past the drain deadline", () => {
  it("answers each unfinished client 503 with an OpenAI error body before closing its connection", async () => {
    const { node, model } = await soloNode(undefined, { drainSec: 0 });
    // The sim engine at its own speed: thousands of output tokens run for seconds.
    const body = JSON.stringify({ model, prompt: "a long one", max_tokens: 2000 });
    const answers = [false, true].map((stream) =>
      fetch(`${node.apiUrl}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: stream ? body.replace(/}$/, ',"stream":true}') : body,
      }).then(
        async (r) => ({ status: r.status, text: await r.text() }),
        (err: Error) => ({ status: 0, text: String(err.cause ?? err) }),
      ),
    );
    const inFlight = () => (node.runtime.clusterView() as { inFlightClients: number }).inFlightClients;
    await waitFor(() => inFlight() === 2, 15_000, "both requests to be in flight");
    await node.stop();
    const [plain, streamed] = await Promise.all(answers);
    expect(plain?.status).toBe(503);
    expect(JSON.parse(plain?.text ?? "")).toMatchObject({ error: { type: "server_error" } });
    // A stream whose headers are not sent yet gets the same error; one already open ends with it.
    expect(streamed?.status === 503 || /"error"/.test(streamed?.text ?? "")).toBe(true);
  }, 30_000);
});
