/**
 * A relay's word, as SWIM carries it: a `gossip` naming `id` alive at `url`, signed with the cluster's
 * `secret` by a node `R` that is no member. What a node must do with it is verify `id` itself.
 */
import { signPeerRequest } from "../../src/net/auth/hmac.js";
import { encodeMesh, MESH_PATH } from "../../src/net/mesh-wire.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";

/** Posts the relay's gossip (`id` at `incarnation`) to `to`'s peer port; resolves to the HTTP status. */
export async function relaySays(
  secret: Buffer,
  to: NodeHandle,
  id: string,
  url: string,
  incarnation = 0,
): Promise<number> {
  const body = encodeMesh(
    { channel: "swim", msg: { type: "gossip", updates: [{ id, status: "alive", incarnation }] } },
    [{ id, url }],
  );
  return postMesh(secret, to, "R", body);
}

/**
 * Posts `body` to `to`'s mesh route as `sender`, signed with `secret` (undefined: no signature at all);
 * resolves to the HTTP status.
 */
export async function postMesh(
  secret: Buffer | undefined,
  to: NodeHandle,
  sender: string,
  body: Uint8Array,
): Promise<number> {
  const headers = secret
    ? signPeerRequest({
        secret,
        sender,
        destination: to.runtime.nodeId,
        method: "POST",
        path: MESH_PATH,
        body,
        now: Date.now(),
      })
    : {};
  const res = await fetch(`${to.peerUrl}${MESH_PATH}`, {
    method: "POST",
    body: Buffer.from(body),
    headers: { ...headers, "content-type": "application/octet-stream" },
  });
  await res.arrayBuffer();
  return res.status;
}
