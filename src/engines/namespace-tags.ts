/**
 * Cache contents tagged with the namespace (tenant `cacheSalt`, LoRA adapter) of the request that
 * computed them, for engines whose own cache compares tokens only (llama.cpp's slots, saved states
 * and RAM prompt cache): a run reuses cached KV only when its tag is the run's own namespace, and the
 * sequences reported to the node are the tagged content's cache keys (`keyTokens`), so the node's
 * tree holds exactly what each namespace can reuse.
 */
import type { Tokens } from "../core/engine.js";
import { keyTokens, type NamespaceFields, namespaceOf } from "../core/namespace.js";

/** The default namespace (no salt, base model). */
export const DEFAULT_NAMESPACE: NamespaceFields = Object.freeze({});

/** A request's namespace fields alone (a request object would keep its prompt alive in a tag). */
export function namespaceTag(r: NamespaceFields): NamespaceFields {
  if (r.cacheSalt === undefined && r.adapter === undefined) return DEFAULT_NAMESPACE;
  return {
    ...(r.cacheSalt !== undefined ? { cacheSalt: r.cacheSalt } : {}),
    ...(r.adapter !== undefined ? { adapter: r.adapter } : {}),
  };
}

export function sameNamespace(a: NamespaceFields, b: NamespaceFields): boolean {
  return namespaceOf(a) === namespaceOf(b);
}

/** The cache key the node's tree gives `tokens` of namespace `ns`. */
export function taggedKey(ns: NamespaceFields, tokens: Tokens): Tokens {
  return keyTokens({ cacheSalt: ns.cacheSalt, adapter: ns.adapter, tokens });
}
