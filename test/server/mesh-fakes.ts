/**
 * Test doubles for MeshPeers (mesh-peers.ts) without a node or a transport: node A whose SWIM holds at
 * most the one member `member()` says, and a peer client whose pools are a set.
 */
import type { PrefixNode } from "../../src/core/node/node.js";
import type { NodeInput } from "../../src/core/node/types.js";
import type { PeerClient } from "../../src/net/transport-client.js";
import type { NodeMetrics } from "../../src/server/metrics.js";
import type { Admin } from "../../src/server/runtime/admin.js";
import { MeshPeers, type MeshPeersOptions } from "../../src/server/runtime/mesh-peers.js";
import { MemberVerification } from "../../src/server/runtime/mesh-verify.js";

/** A logger that says nothing. */
export const QUIET_LOGGER = { info() {}, warn() {}, error() {}, debug() {} };

/** A logger that says nothing but keeps each warning's message, in order, in `warnings`. */
export function warningLogger() {
  const warnings: string[] = [];
  const logger = {
    info() {},
    error() {},
    debug() {},
    warn: (_: unknown, m: string) => void warnings.push(m),
  };
  return { warnings, logger };
}

/** MeshPeers of cluster "c" over these doubles; `over` replaces any of the other options. */
export function meshPeersOver(
  node: PrefixNode,
  client: PeerClient,
  admin: Admin,
  over: Partial<MeshPeersOptions> = {},
): MeshPeers {
  return new MeshPeers({
    node,
    client,
    admin,
    metrics: {} as NodeMetrics,
    logger: QUIET_LOGGER,
    clusterId: "c",
    helloModel: undefined,
    feed: () => {},
    maxMessageBytes: 1 << 20,
    ...over,
  });
}

/** Node A under gossip scuttlebutt; SWIM's member table is `member()` (none when undefined). */
export function fakeSwimNode(
  member: () => { id: string; status: string; incarnation?: number } | undefined,
): PrefixNode {
  return {
    id: "A",
    config: { gossip: "scuttlebutt" },
    meshMembers: () => {
      const m = member();
      return m === undefined ? [] : [m];
    },
  } as unknown as PrefixNode;
}

/** A peer client whose pools are `pools`; every hello asked for answers `verifiedHello()`. */
export function fakePeerClient(pools: Set<string>, verifiedHello: () => Promise<unknown>): PeerClient {
  return {
    authMode: "insecure",
    has: (id: string) => pools.has(id),
    setPeer: (id: string) => void pools.add(id),
    removePeer: (id: string) => void pools.delete(id),
    verifiedHello,
  } as unknown as PeerClient;
}

/** A's verification; every hello asked for answers `answer()`; what it fed and warned is kept. */
export function verificationOver(answer: () => Promise<unknown>) {
  const fed: NodeInput[] = [];
  const { warnings, logger } = warningLogger();
  let asked = 0;
  const v = new MemberVerification(
    {
      node: fakeSwimNode(() => undefined),
      client: fakePeerClient(new Set(), () => {
        asked++;
        return answer();
      }),
      metrics: { authRejected: { inc() {} } } as unknown as NodeMetrics,
      logger,
      clusterId: "c",
      helloModel: undefined,
      feed: (i) => void fed.push(i),
    },
    {
      pool: () => true,
      noteHello() {},
      isMember: () => false,
      verifiedMember() {},
      dropStranger() {},
      endLeftPool() {},
    },
  );
  return { v, fed, warnings, asked: () => asked };
}
