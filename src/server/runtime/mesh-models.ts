/**
 * The models of a mixed mesh, for `/v1/models` and for resolving a request's `model`: this node's
 * own (its engine's model, then its adapters), then every member's as its hello advertised them,
 * each with the nodes serving it. A name a node advertises besides its hello's `model` is one of its
 * LoRA adapters.
 */

export interface MeshModel {
  id: string;
  /** Node ids serving it, this node first when it does. */
  nodes: string[];
  /** A LoRA adapter (run as `adapter`, its own cache namespace), not a base model. */
  adapter: boolean;
}

export interface NodeModels {
  id: string;
  /** The base model (hello `model`); undefined: not heard from yet. */
  base: string | undefined;
  /** Every model it serves, the base included. */
  models: readonly string[];
}

export function meshModels(self: NodeModels, peers: Iterable<NodeModels>): MeshModel[] {
  const byId = new Map<string, MeshModel>();
  for (const n of [self, ...peers]) {
    if (n.base === undefined) continue;
    for (const m of n.models) {
      const entry = byId.get(m) ?? { id: m, nodes: [], adapter: m !== n.base };
      if (!entry.nodes.includes(n.id)) entry.nodes.push(n.id);
      byId.set(m, entry);
    }
  }
  return [...byId.values()];
}

/** The models of each peer in `ids`: its base model as its hello said, and what its snapshots list. */
export function peerModels(
  ids: Iterable<string>,
  admin: { peerBaseModel(id: string): string | undefined },
  node: { peerModels: { of(id: string): readonly string[] } },
): NodeModels[] {
  return [...ids].map((id) => ({ id, base: admin.peerBaseModel(id), models: node.peerModels.of(id) }));
}
