/**
 * A BlockStored's and a BlockRemoved's fields, checked, whichever encoding (positional or map) carried
 * them, and what a stored chain's hashes depend on beside tokens and parent: the namespace the API
 * names (LoRA adapter, cache salt), or inputs the node cannot name (then the blocks never match).
 */
import { hash, hashList, int, mediumOf, optionalInt, optionalString, tokenList } from "./wire-checks.js";
import { type BlockRemoved, type BlockStored, KvWireError, type WireLimits } from "./wire-types.js";

/** An event's fields by name, whichever encoding carried them. */
export type Fields = (name: string) => unknown;

export function decodeStored(
  f: Fields,
  where: string,
  limits: WireLimits,
  positional: boolean,
  tail: readonly unknown[],
): BlockStored {
  const hashes = hashList(f("block_hashes"), `${where}.block_hashes`, limits);
  if (hashes.length === 0) throw new KvWireError(`${where}: BlockStored with no block_hashes`);
  const parentRaw = f("parent_block_hash");
  const parent = parentRaw === null || parentRaw === undefined ? null : hash(parentRaw, `${where}.parent`);
  const tokens = tokenList(f("token_ids"), `${where}.token_ids`, limits);
  const blockSize = int(f("block_size"), `${where}.block_size`, 0, limits.maxTokensPerEvent);
  const medium = mediumOf(f("medium"), `${where}.medium`, limits);
  const group = optionalInt(f("group_idx"), `${where}.group_idx`, 0, 1 << 16);
  const kind = optionalString(f("kv_cache_spec_kind"), `${where}.kv_cache_spec_kind`, limits);
  const window = f("kv_cache_spec_sliding_window");
  const partialGroup = (kind !== null && !FULL_KINDS.has(kind)) || (window !== null && window !== undefined);
  let namespaced = false;
  // SGLang's salt ({cache_salt}, its BlockStoredMetadata) on every block of a salted chain: at position
  // 7 in its first layout, past vLLM's fields in its second, by name in maps. Other values there may
  // key the hashes by inputs the node cannot name.
  let salt: string | undefined;
  const meta = (v: unknown) => {
    if (v === null || v === undefined) return;
    const s = metadataSalt(v);
    if (s === undefined || (salt !== undefined && s !== null && s !== salt)) namespaced = true;
    else if (s !== null) salt = s;
  };
  for (const v of tail) meta(v);
  if (!positional) {
    meta(f("metadata"));
    const named = f("cache_salt");
    if (named !== null && named !== undefined) meta(new Map([["cache_salt", named]]));
  }
  const loraName = f("lora_name");
  let adapter: string | undefined;
  if (positional && loraName !== null && loraName !== undefined && typeof loraName !== "string") {
    meta(loraName);
  } else {
    const name = optionalString(loraName, `${where}.lora_name`, limits);
    if (name !== null) adapter = name;
  }
  const loraId = f("lora_id");
  if (loraId !== null && loraId !== undefined) {
    int(loraId, `${where}.lora_id`, Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
    // Older vLLM keys blocks by the adapter's integer id alone: not a name the API knows.
    if (adapter === undefined) namespaced = true;
  }
  const extra = f("extra_keys");
  let blockNamespaced: boolean[] | null = null;
  let cacheSalt: string | undefined;
  if (extra !== null && extra !== undefined) {
    if (!Array.isArray(extra)) {
      if (!positional) throw new KvWireError(`${where}.extra_keys is not an array`);
      namespaced = true;
    } else if (extra.length === hashes.length) {
      blockNamespaced = extra.map((k, i) => {
        const rest = namespaceKeysRemoved(k, adapter);
        if (rest === null || saltMarker(rest, salt)) return false;
        // vLLM: extra keys are LoRA name, multimodal keys, cache salt (first block only), embeddings.
        // A lone string left on a sequence's first block is the salt; anything else keys the block
        // by inputs the node cannot reproduce.
        if (
          i === 0 &&
          parent === null &&
          rest.length === 1 &&
          typeof rest[0] === "string" &&
          rest[0] !== ""
        ) {
          cacheSalt = rest[0];
          return false;
        }
        return true;
      });
    } else if (extra.some((k) => k !== null && !saltMarker(namespaceKeysRemoved(k, adapter), salt)))
      namespaced = true;
  }
  // The salt seeds the chain's first hash: it names the namespace of a chain's start; blocks after
  // are in it through their parent.
  if (salt !== undefined && parent === null) {
    if (cacheSalt !== undefined && cacheSalt !== salt) namespaced = true;
    cacheSalt = salt;
  }
  const namespace =
    adapter === undefined && cacheSalt === undefined
      ? undefined
      : { ...(adapter !== undefined ? { adapter } : {}), ...(cacheSalt !== undefined ? { cacheSalt } : {}) };
  return {
    type: "BlockStored",
    hashes,
    parent,
    tokens,
    blockSize,
    medium,
    namespaced,
    blockNamespaced,
    ...(namespace ? { namespace } : {}),
    group,
    ...(partialGroup ? { partialGroup: true as const } : {}),
  };
}

/**
 * vLLM's group kinds whose blocks stay while a request holds them: a chain's parent is held. A sliding
 * window, chunked local attention or Mamba group frees (or never stores: null blocks) the blocks
 * behind, yet names the request's previous hash as parent.
 */
const FULL_KINDS = new Set(["full_attention", "mla_attention", "sink_full_attention"]);

/** SGLang's metadata's salt: null for none (empty), undefined for anything else. */
function metadataSalt(v: unknown): string | null | undefined {
  if (!(v instanceof Map)) return undefined;
  if (v.size === 0) return null;
  const salt = v.get("cache_salt");
  return v.size === 1 && typeof salt === "string" && salt !== "" ? salt : undefined;
}

/** SGLang also puts its salt in extra_keys, prefixed as dynamo's router reads it: not another key. */
const SALT_MARKER = "dynamo-cache-salt:";
function saltMarker(rest: unknown[] | null, salt: string | undefined): boolean {
  return salt !== undefined && rest !== null && rest.length === 1 && rest[0] === SALT_MARKER + salt;
}

/** A block's extra keys without the LoRA name vLLM puts first; null when nothing is left. */
function namespaceKeysRemoved(keys: unknown, adapter: string | undefined): unknown[] | null {
  if (keys === null || keys === undefined) return null;
  if (!Array.isArray(keys)) return [keys];
  const rest = adapter !== undefined && keys[0] === adapter ? keys.slice(1) : keys;
  return rest.length === 0 ? null : rest;
}

export function decodeRemoved(f: Fields, where: string, limits: WireLimits): BlockRemoved {
  const hashes = hashList(f("block_hashes"), `${where}.block_hashes`, limits);
  const medium = mediumOf(f("medium"), `${where}.medium`, limits);
  const group = optionalInt(f("group_idx"), `${where}.group_idx`, 0, 1 << 16);
  const rc = f("remaining_copy_counts");
  let remainingCopies: number[] | null = null;
  if (rc !== null && rc !== undefined) {
    if (!Array.isArray(rc) || rc.length !== hashes.length)
      throw new KvWireError(`${where}.remaining_copy_counts must be a list as long as block_hashes`);
    remainingCopies = rc.map((c, i) => int(c, `${where}.remaining_copy_counts[${i}]`, 0, 1 << 30));
  }
  return { type: "BlockRemoved", hashes, medium, group, remainingCopies };
}
