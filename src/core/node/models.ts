/**
 * Which models each node serves, for a mesh of mixed models: a request that names a model is routed
 * only among the nodes that serve it, and a node that does not serve it routes it without ever
 * running it. This node's own models are its config (`models`); a peer's are what its hello said
 * (the runtime passes them in). Unknown — a peer not yet heard, a request naming no model, a node
 * with no `models` configured — means "serves it": exactly the behaviour before models were known,
 * so single-model meshes and the simulator route as they always did.
 */
import { invariant } from "../invariant.js";
import type { NodeId } from "./types.js";

/** Most models one node may advertise, and the longest name (a peer controls both). */
export const MAX_MODELS = 64;
export const MAX_MODEL_NAME = 256;

/** Whether `models` (a node's advertised list; empty: unknown) includes `model` (undefined: any). */
export function servesModel(models: readonly string[], model: string | undefined): boolean {
  return model === undefined || models.length === 0 || models.includes(model);
}

export class PeerModels {
  private readonly byPeer = new Map<NodeId, readonly string[]>();

  /** What `id`'s hello says it serves (a bounded copy); an empty list forgets it (unknown again). */
  set(id: NodeId, models: readonly string[]): void {
    const list = models.filter((m) => typeof m === "string" && m.length > 0 && m.length <= MAX_MODEL_NAME);
    if (list.length === 0) this.byPeer.delete(id);
    else this.byPeer.set(id, [...new Set(list)].slice(0, MAX_MODELS));
    invariant((this.byPeer.get(id)?.length ?? 0) <= MAX_MODELS, "a peer advertises too many models");
  }

  delete(id: NodeId): void {
    this.byPeer.delete(id);
  }

  /** The models `id` advertised (empty: unknown). */
  of(id: NodeId): readonly string[] {
    return this.byPeer.get(id) ?? [];
  }

  /** Whether peer `id` may run a request for `model`. */
  serves(id: NodeId, model: string | undefined): boolean {
    return servesModel(this.of(id), model);
  }
}
