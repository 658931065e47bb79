/**
 * What the KV-event decoder (wire.ts) yields and what bounds it: the checked events and batch, the
 * limits on everything the publisher controls, and the error that drops a batch whole.
 */

/** A block hash as a map key: `i:<decimal>` for integers, `b:<hex>` for bytes. */
export type BlockHash = string;

export interface BlockStored {
  type: "BlockStored";
  hashes: BlockHash[];
  /** The block before `hashes[0]` in its sequence; null: the first block of a sequence. */
  parent: BlockHash | null;
  /** All blocks' tokens, concatenated (`hashes.length` equal parts). */
  tokens: Uint32Array;
  blockSize: number;
  /** "GPU" in upper case, another medium as sent, or null (older publishers: GPU). */
  medium: string | null;
  /**
   * Set when the blocks' hashes depend on more than tokens, parent and `namespace` (multimodal
   * inputs, an adapter known by id only, or an extension we do not know): such blocks never match.
   */
  namespaced: boolean;
  /**
   * Per block, where the publisher keys blocks one by one (vLLM's `extra_keys`: multimodal inputs and
   * the cache salt touch only the blocks they fall in; the blocks after chain to those): true for a
   * block whose own hash takes more than tokens and parent. Null: `namespaced` says it for all.
   */
  blockNamespaced: boolean[] | null;
  /**
   * The cache namespace the chain's hashes name, where the publisher says it in a form the API names
   * too: the LoRA adapter (`lora_name`, vLLM's model name of the adapter) and the tenant's salt (vLLM
   * mixes `cache_salt` into the sequence's first block's extra keys, after the LoRA name). Absent:
   * the default namespace. The mirror roots such a chain at `keyTokens` of its namespace.
   */
  namespace?: { adapter?: string; cacheSalt?: string };
  /** vLLM's KV-cache group (hybrid models have several); null: the only group. */
  group: number | null;
  /**
   * The group keeps only part of a sequence (vLLM's `kv_cache_spec_kind` other than full attention,
   * or a `kv_cache_spec_sliding_window`): its parent may be a block it dropped or never stored.
   */
  partialGroup?: true;
}

export interface BlockRemoved {
  type: "BlockRemoved";
  hashes: BlockHash[];
  medium: string | null;
  group: number | null;
  /** Physical copies of each hash left after this removal, where the publisher says (newer vLLM). */
  remainingCopies: number[] | null;
}

export interface AllBlocksCleared {
  type: "AllBlocksCleared";
}

export type KvEvent = BlockStored | BlockRemoved | AllBlocksCleared;

export interface KvEventBatch {
  /** The publisher's wall clock, seconds. */
  ts: number;
  events: KvEvent[];
  dataParallelRank: number | null;
}

export interface WireLimits {
  maxPayloadBytes: number;
  maxEventsPerBatch: number;
  maxHashesPerEvent: number;
  maxTokensPerEvent: number;
  maxStringLength: number;
  /** Largest msgpack map / positional struct accepted for one event. */
  maxFieldsPerEvent: number;
}

export const DEFAULT_WIRE_LIMITS: Readonly<WireLimits> = {
  maxPayloadBytes: 16 << 20,
  maxEventsPerBatch: 1 << 16,
  maxHashesPerEvent: 1 << 16,
  maxTokensPerEvent: 1 << 21,
  maxStringLength: 4096,
  maxFieldsPerEvent: 64,
};

export class KvWireError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "KvWireError";
  }
}
