/**
 * Models on the client API: what `GET /v1/models` lists (every model of the mesh, with the nodes
 * serving it) and how a request's `model` is served — by this node (its engine's model, or one of
 * its LoRA adapters, vLLM-style: an adapter is named as a model), or only routed by it to the nodes
 * of the mesh that serve it (mixed meshes).
 */
import type { InferenceInput, NodeService } from "../service.js";

/** The request fields a resolved `model` sets. */
export type ModelRoute = Pick<InferenceInput, "model" | "adapter" | "tokenizer">;

/** How `model` is served; undefined when no node of the mesh serves it. */
export function resolveModel(service: NodeService, model: string): ModelRoute | undefined {
  if (model === service.modelId) return { model };
  if (service.adapters?.includes(model)) return { model, adapter: model };
  const m = service.meshModels?.().find((x) => x.id === model);
  if (m === undefined || m.nodes.length === 0) return undefined;
  // Our tokens are another model's: good for routing, and the serving node tokenizes again.
  return { model, tokenizer: service.modelId, ...(m.adapter ? { adapter: model } : {}) };
}

/** `GET /v1/models`'s data: this node's model first (clients take it as the node's), then the mesh's. */
export function modelList(service: NodeService) {
  const own = {
    id: service.modelId,
    object: "model",
    created: 0,
    owned_by: "prefixmesh",
    // vLLM's name for the longest prompt + output: clients (prefixmesh bench) check prompts fit.
    max_model_len: service.maxContextTokens,
  };
  const mesh = service.meshModels?.();
  if (mesh === undefined) return [own];
  return mesh.map((m) => ({
    ...(m.id === service.modelId ? own : { id: m.id, object: "model", created: 0, owned_by: "prefixmesh" }),
    ...(m.adapter ? { adapter: true } : {}),
    nodes: m.nodes,
  }));
}

/** `GET /v1/models/{model}`'s answer for a model the mesh serves: its list entry (an adapter has none). */
export function modelEntry(service: NodeService, id: string) {
  return (
    modelList(service).find((m) => m.id === id) ?? { id, object: "model", created: 0, owned_by: "prefixmesh" }
  );
}
