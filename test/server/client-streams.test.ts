/**
 * A streaming client's answer from a node whose output did not stream to it — a late answer to an
 * attempt given up while the request waited here (a hedged one is taken for a stream only then:
 * core/node/hedge.ts): the client gets the whole text once, or an error where it cannot continue.
 */
import { describe, expect, it } from "vitest";
import type { EngineRequest, EngineResult } from "../../src/core/engine.js";
import { forwardToWire } from "../../src/net/forward-wire.js";
import { ClientStreams, engineRequestOf } from "../../src/server/runtime/client-streams.js";
import type { ServeOutcome } from "../../src/server/service.js";

function open(temperature?: number) {
  const streams = new ClientStreams();
  const request: EngineRequest = { id: "r1", tokens: new Uint32Array([1, 2, 3]), maxTokens: 8 };
  if (temperature !== undefined) request.temperature = temperature;
  const chunks: [string, string][] = [];
  const settled = streams.open("r1", request, { onChunk: (text, by) => chunks.push([text, by]) }, {});
  const outcome = settled.then(
    (o) => ({ ok: true as const, o }),
    (e: Error) => ({ ok: false as const, e }),
  );
  return { streams, request, chunks, outcome };
}

function answer(text: string, servedBy: string): ServeOutcome {
  const result = { text, promptTokens: 3, cachedTokens: 0, outputTokens: 2 } as unknown as EngineResult;
  const timing = { queueMs: 0, prefillMs: 0, decodeMs: 0, networkMs: 0, totalMs: 0 };
  return { reqId: "r1", result, servedBy, hops: 1, timing: timing as ServeOutcome["timing"], fallbacks: 1 };
}

describe("a streaming client answered by a node whose output did not reach it", () => {
  it("nothing streamed yet: the whole text goes out, then the answer", async () => {
    const { streams, chunks, outcome } = open();
    expect(streams.answer("r1", answer("one two", "B"))).toBe(true);
    expect(chunks).toEqual([["one two", "B"]]);
    expect((await outcome).ok).toBe(true);
  });

  it("our own run streamed part of the same greedy text: only the rest goes out", async () => {
    const { streams, request, chunks, outcome } = open(0);
    streams.relay(streams.streamingFor(request) as string, "A", "one");
    expect(streams.answer("r1", answer("one two", "B"))).toBe(true);
    expect(chunks).toEqual([
      ["one", "A"],
      [" two", "B"],
    ]);
    expect((await outcome).ok).toBe(true);
  });

  it("a text that does not continue what was sent, or a sampled one: the stream ends with an error", async () => {
    for (const [temperature, text] of [
      [0, "uno dos"],
      [0.8, "one two"],
    ] as const) {
      const { streams, chunks, outcome } = open(temperature);
      streams.relay("r1", "A", "one");
      expect(streams.answer("r1", answer(text, "B"))).toBe(false);
      expect(chunks).toEqual([["one", "A"]]);
      const o = await outcome;
      expect(o.ok).toBe(false);
      expect(o.ok ? "" : o.e.message).toMatch(/mid-stream/);
    }
  });

  it("the node whose output streamed answers: nothing is sent twice", async () => {
    const { streams, chunks, outcome } = open();
    streams.relay("r1", "B", "one");
    streams.relay("r1", "B", " two");
    expect(streams.answer("r1", answer("one two", "B"))).toBe(true);
    expect(chunks.map(([t]) => t).join("")).toBe("one two");
    expect((await outcome).ok).toBe(true);
  });

  it("the node whose output streamed, cut off when the node fell back from it, answers: the rest goes out", async () => {
    const { streams, chunks, outcome } = open();
    streams.relay("r1", "B", "one");
    expect(streams.answer("r1", answer("one two three", "B"))).toBe(true);
    expect(chunks.map(([t]) => t).join("")).toBe("one two three");
    expect((await outcome).ok).toBe(true);
  });

  it("a forward re-sent to a restarted peer: its new stream is spliced, not appended", async () => {
    const { streams, chunks, outcome } = open(0);
    streams.relay("r1", "B", "one", "B#1");
    // The new process runs it from the start, on the re-sent forward's stream.
    streams.relay("r1", "B", "on", "B#2");
    streams.relay("r1", "B", "e two", "B#2");
    expect(chunks.map(([t]) => t).join("")).toBe("one two");
    expect(streams.answer("r1", answer("one two", "B"))).toBe(true);
    expect(chunks.map(([t]) => t).join("")).toBe("one two");
    expect((await outcome).ok).toBe(true);
  });

  it("a sampled forward re-sent to a restarted peer: the stream ends with an error", async () => {
    const { streams, chunks, outcome } = open(0.8);
    streams.relay("r1", "B", "one", "B#1");
    streams.relay("r1", "B", "uno", "B#2");
    expect(chunks).toEqual([["one", "B"]]);
    const o = await outcome;
    expect(o.ok ? "" : o.e.message).toMatch(/mid-stream/);
  });

  it("a sampled answer that came on another stream of the streaming node (a restart's re-send): it must continue what was sent", async () => {
    for (const [text, ok] of [
      ["", false],
      ["uno dos", false],
      // A copy of the same run's forward (a probe) is answered with the same run's text.
      ["one two", true],
    ] as const) {
      const { streams, request, chunks, outcome } = open(0.8);
      streams.relay("r1", "B", "one", "B#1");
      let answered: boolean | undefined;
      streams.answering({ request, stream: "B#2" }, () => {
        answered = streams.answer("r1", answer(text, "B"));
      });
      expect(answered).toBe(ok);
      expect(chunks.map(([t]) => t).join("")).toBe(ok ? text : "one");
      const o = await outcome;
      expect(o.ok ? "" : o.e.message).toMatch(ok ? /^$/ : /mid-stream/);
    }
  });

  it("an answer on the stream that streamed keeps its last-chunk leeway, sampled too", async () => {
    const { streams, request, chunks, outcome } = open(0.8);
    streams.relay("r1", "B", "one tw", "B#1");
    let answered: boolean | undefined;
    streams.answering({ request, stream: "B#1" }, () => {
      answered = streams.answer("r1", answer("one", "B"));
    });
    expect(answered).toBe(true);
    expect(chunks).toEqual([["one tw", "B"]]);
    expect((await outcome).ok).toBe(true);
  });

  it("the node knows a streaming client's request streams (hedge.ts); a forward does not carry it", () => {
    const input = { prompt: "one", tokens: new Uint32Array([1, 2, 3]), maxTokens: 8 };
    expect(engineRequestOf("r1", input).stream).toBeUndefined();
    const request = engineRequestOf("r1", input, true);
    expect(request.stream).toBe(true);
    const wire = forwardToWire({ type: "forward", reqId: "r1", attempt: 1, hops: 1, request });
    expect(wire.request).not.toHaveProperty("stream");
  });
});

describe("engineRequestOf", () => {
  it("carries the client's sampling fields, penalties included, into the request the mesh runs", () => {
    const r = engineRequestOf("A-1", {
      prompt: "p",
      tokens: Uint32Array.of(1, 2),
      maxTokens: 3,
      temperature: 0,
      presencePenalty: 1,
      frequencyPenalty: -0.5,
    });
    expect(r).toMatchObject({ id: "A-1", temperature: 0, presencePenalty: 1, frequencyPenalty: -0.5 });
    expect(
      "presencePenalty" in engineRequestOf("A-2", { prompt: "p", tokens: Uint32Array.of(1), maxTokens: 1 }),
    ).toBe(false);
  });
});

describe("a client hanging up", () => {
  it("ends its slot with 499 and tells the node once; after its answer, a hang-up tells nothing", async () => {
    const gone: string[] = [];
    const streams = new ClientStreams((g) => gone.push(`${g.reqId} ${g.reason}`));
    const request: EngineRequest = { id: "r1", tokens: new Uint32Array([1, 2, 3]), maxTokens: 8 };
    const links = [{}, {}] as { onGone?: () => void }[];
    const first = streams
      .open("r1", request, {}, links[0] as object)
      .catch((e: { status: number }) => e.status);
    links[0]?.onGone?.();
    links[0]?.onGone?.();
    expect(await first).toBe(499);
    expect(gone).toEqual(["r1 hangup"]);
    const second = streams.open("r2", { ...request, id: "r2" }, {}, links[1] as object);
    expect(streams.answer("r2", { ...answer("done", "A"), reqId: "r2" })).toBe(true);
    links[1]?.onGone?.();
    expect((await second).result.text).toBe("done");
    expect(gone).toEqual(["r1 hangup"]);
  });
});

describe("a client's deadline passing", () => {
  it("ends its slot with 504 and tells the node, as a hang-up does: its work is for nobody", async () => {
    const gone: string[] = [];
    const streams = new ClientStreams((g) => gone.push(`${g.reqId} ${g.reason}`));
    const request: EngineRequest = { id: "r1", tokens: new Uint32Array([1, 2, 3]), maxTokens: 8 };
    const status = streams.open("r1", request, {}, {}).catch((e: { status: number }) => e.status);
    streams.expireAfter("r1", 1);
    expect(await status).toBe(504);
    expect(gone).toEqual(["r1 deadline"]);
  });
});
