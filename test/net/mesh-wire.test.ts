/** The mesh envelope: swim and gossip messages with their address hints, validated and bounded. */
import { describe, expect, it } from "vitest";
import type { MeshMessage } from "../../src/core/node/types.js";
import { decodeMesh, encodeMesh, MAX_MESH_ADDRS, meshMentions, meshUrlOk } from "../../src/net/mesh-wire.js";

const sync: MeshMessage = {
  channel: "swim",
  msg: {
    type: "sync",
    reply: true,
    members: [
      { id: "a", status: "alive", incarnation: 2 },
      { id: "b", status: "dead", incarnation: 1, from: "a" },
    ],
  },
};

describe("mesh envelope", () => {
  it("round-trips a swim message and a gossip digest with their addresses", () => {
    const addrs = [{ id: "a", url: "http://127.0.0.1:9001" }];
    const d = decodeMesh(encodeMesh(sync, addrs), 1 << 20);
    expect(d).toEqual({ ok: true, envelope: { msg: sync, addrs } });
    const g: MeshMessage = { channel: "gossip", msg: { type: "digest", room: 0, entries: [] } };
    expect(decodeMesh(encodeMesh(g, []), 1 << 20)).toEqual({ ok: true, envelope: { msg: g, addrs: [] } });
  });

  it("carries addresses of the live members a message names, not of the dead", () => {
    expect(meshMentions(sync)).toEqual(["a"]);
  });

  it("refuses bad addresses, unknown channels and garbage with a reason", () => {
    const bad = encodeMesh(sync, [{ id: "a", url: "ftp://x:1" }]);
    expect(decodeMesh(bad, 1 << 20)).toMatchObject({ ok: false, error: /bad address url/ });
    expect(decodeMesh(Uint8Array.of(9, 0), 1 << 20)).toMatchObject({ ok: false, error: /unknown channel/ });
    expect(decodeMesh(Uint8Array.of(0, 0, 200), 1 << 20)).toMatchObject({ ok: false });
    const many = Uint8Array.of(0, MAX_MESH_ADDRS + 1);
    expect(decodeMesh(many, 1 << 20)).toMatchObject({ ok: false, error: /addresses, at most/ });
    const longVarint = Uint8Array.of(0, ...Array(8).fill(0x80), 1);
    expect(decodeMesh(longVarint, 1 << 20)).toMatchObject({ ok: false, error: /varint too long/ });
    // One address announced, its id cut short.
    expect(decodeMesh(Uint8Array.of(0, 1, 5, 97), 1 << 20)).toMatchObject({ ok: false, error: /truncated/ });
  });

  it("accepts only scheme://host:port URLs", () => {
    expect(meshUrlOk("https://10.0.0.2:9080")).toBe(true);
    expect(meshUrlOk("http://a/b")).toBe(false);
    expect(meshUrlOk("http://u:p@h:1")).toBe(false);
    expect(meshUrlOk("")).toBe(false);
  });
});
