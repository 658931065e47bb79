/**
 * MeshPeers' bound on mesh messages in flight to one peer (mesh-peers.ts [Bounded]) drops what is past
 * it, as datagrams may be — but never our goodbye: dropped, a graceful leave under load would look
 * like a crash to that peer (declared dead seconds later, owing our forwards no final cancels).
 */
import { expect, it } from "vitest";
import type { MeshMessage } from "../../src/core/node/types.js";
import type { PeerClient } from "../../src/net/transport-client.js";
import type { Admin } from "../../src/server/runtime/admin.js";
import { MAX_IN_FLIGHT } from "../../src/server/runtime/mesh-peers.js";
import { fakeSwimNode, meshPeersOver } from "./mesh-fakes.js";

it("past the in-flight bound gossip is dropped, the goodbye still goes", async () => {
  const sent: string[] = [];
  // Test double: B holds every mesh message it gets, never answering (a peer under load).
  const client = {
    authMode: "insecure",
    has: () => true,
    sendMesh: (to: string) => {
      sent.push(to);
      return new Promise(() => {});
    },
  } as unknown as PeerClient;
  const node = fakeSwimNode(() => ({ id: "B", status: "alive", incarnation: 1 }));
  const mesh = meshPeersOver(node, client, {} as Admin);
  const gossip: MeshMessage = { channel: "swim", msg: { type: "gossip", updates: [] } };
  for (let i = 0; i < MAX_IN_FLIGHT + 2; i++) void mesh.send("B", gossip);
  expect(sent).toHaveLength(MAX_IN_FLIGHT);
  void mesh.send("B", { channel: "swim", msg: { type: "goodbye", incarnation: 1 } });
  expect(sent).toHaveLength(MAX_IN_FLIGHT + 1);
});
