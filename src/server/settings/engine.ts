/** Settings: The engine a node serves with, and its cache. */
import { z } from "zod";
import { KvEventsOptionsSchema, zmqEndpointSchema } from "../../engines/kv-events/options.js";
import { CACHE_MIRRORS } from "../../engines/llama-slots/options.js";
import { MAX_CONTEXT_TOKENS, TOKENIZER_CHOICES } from "../../engines/openai/options.js";
import { DEFAULT_PROFILE, PROFILE_NAMES } from "../../engines/sim/profiles.js";
import { setting } from "./doc.js";
import { bool, engineDefault, L, num, O } from "./values.js";

/** A kvEvents option's number as a flag, env or YAML value gives it, bounded as options.ts bounds it. */
const kvNumber = (
  key: "replayTimeoutMs" | "group" | "settleMs" | "probeIntervalMs" | "maxQueuedBatches" | "maxQueuedBytes",
) =>
  z
    .union([z.number(), z.string().trim().min(1, "must be a number")])
    .transform(Number)
    .pipe(KvEventsOptionsSchema.shape[key].unwrap())
    .optional();
/** The option's own default, quoted: stated once, in options.ts. */
const kvDefault = (key: Parameters<typeof kvNumber>[0]) =>
  `\`${KvEventsOptionsSchema.shape[key].def.defaultValue}\``;

export const engineSettings = {
  engine: setting(z.enum(["llamacpp", "openai", "sim"]).default("llamacpp"), {
    section: "Engine",
    value: "kind",
    description:
      "The inference engine: `llamacpp` (embedded llama.cpp, CPU build), `openai` (a remote " +
      "OpenAI-compatible server: llama-server, vLLM, SGLang, Ollama) or `sim` (the simulator's cost model).",
  }),
  model: setting(z.string().min(1).max(4096).default("generated"), {
    section: "Engine",
    value: "path|generated|name",
    description:
      "llamacpp: a GGUF file, or `generated` for the built-in generated model (made once, cached in " +
      "$PREFIXMESH_CACHE_DIR or ~/.cache/prefixmesh). openai: the remote server's model name. sim: runs " +
      "no model, so any other value than the default is refused. " +
      "Every node of a cluster serves the same model unless --mixed-models.",
  }),
  engineUrl: setting(z.string().url().max(2048).optional(), {
    section: "Engine",
    value: "url",
    description:
      "openai engine: the remote server's URL, with or without a trailing `/v1` (e.g. `http://127.0.0.1:8000`); " +
      "the node calls its /v1/completions, /tokenize and /health.",
  }),
  engineTokenizer: setting(
    z.enum(TOKENIZER_CHOICES, { error: `must be one of ${TOKENIZER_CHOICES.join(", ")}` }).optional(),
    {
      section: "Engine",
      value: "kind",
      defaultText: engineDefault(O.tokenizer),
      description:
        "openai engine: how prompts are tokenized — `server` (the server's /tokenize), `local` (gpt-tokenizer: " +
        "right only for a matching model), or `auto` (the server's when it has one, else local).",
    },
  ),
  engineContextTokens: setting(num(1, MAX_CONTEXT_TOKENS, true).optional(), {
    section: "Engine",
    value: "n",
    defaultText: engineDefault(O.maxContextTokens),
    description:
      "openai engine: tokens per request (prompt + output) when the server reports no limit; the server's own " +
      "(vLLM/SGLang `max_model_len`, llama.cpp's `n_ctx` per slot) wins when it does.",
  }),
  engineApiKey: setting(z.string().max(4096).optional(), {
    section: "Engine",
    flag: false,
    description:
      "openai engine: the remote server's API key, sent as a bearer token. Never a flag (a command line is " +
      "visible to every user of the machine): set the variable or the YAML key.",
  }),
  engineKvEvents: setting(zmqEndpointSchema.optional(), {
    section: "Engine",
    value: "tcp://host:port",
    description:
      "openai engine, vLLM or SGLang: the server's KV-event PUB endpoint (its `--kv-events-config` endpoint), " +
      "so the node mirrors the server's cache exactly instead of modelling it (docs/engines.md).",
  }),
  engineKvReplay: setting(zmqEndpointSchema.optional(), {
    section: "Engine",
    value: "tcp://host:port",
    description:
      "The server's KV-event replay endpoint (`replay_endpoint`): lost batches are recovered from it.",
  }),
  engineKvTopic: setting(z.string().max(256).optional(), {
    section: "Engine",
    value: "topic",
    defaultText: '`""` (every topic)',
    description: "The server's KV-event topic (`topic` in its `--kv-events-config`).",
  }),
  engineKvRank: setting(num(0, 65_535, true).optional(), {
    section: "Engine",
    value: "n",
    defaultText: "`0`",
    description:
      "The data-parallel rank this node follows: one node per rank, its stream on the endpoint's port + rank.",
  }),
  engineKvGroup: setting(kvNumber("group"), {
    section: "Engine",
    value: "n",
    defaultText: kvDefault("group"),
    description:
      "The KV-cache group this node mirrors (a hybrid-attention model publishes one per group, vLLM's " +
      "`group_idx`): events of other groups are counted and ignored.",
  }),
  engineKvReplayTimeoutMs: setting(kvNumber("replayTimeoutMs"), {
    section: "Engine",
    value: "ms",
    defaultText: kvDefault("replayTimeoutMs"),
    description:
      "With --engine-kv-replay: one replay's bound, from the request to its last batch; the batches a gap's " +
      "replay has not brought by then are lost (the mirror degrades; an idle probe's is only tried again). " +
      "Raise it for a server far away or a large buffer.",
  }),
  engineKvProbeMs: setting(kvNumber("probeIntervalMs"), {
    section: "Engine",
    value: "ms",
    defaultText: kvDefault("probeIntervalMs"),
    description:
      "With --engine-kv-replay: with no batch for this long, ask for a replay from the next batch expected, " +
      "to find batches lost with nothing after them (0: never).",
  }),
  engineKvSettleMs: setting(kvNumber("settleMs"), {
    section: "Engine",
    value: "ms",
    defaultText: kvDefault("settleMs"),
    description:
      "After a run, wait up to this long for the events of its prompt's blocks before reporting the cache " +
      "(0: never wait); a run's answer can be this much later.",
  }),
  engineKvQueueBatches: setting(kvNumber("maxQueuedBatches"), {
    section: "Engine",
    value: "n",
    defaultText: kvDefault("maxQueuedBatches"),
    description:
      "Live KV-event batches held while the node catches up (a replay under way, a busy server); beyond, " +
      "the oldest are dropped and recovered by replay like any gap.",
  }),
  engineKvQueueBytes: setting(kvNumber("maxQueuedBytes"), {
    section: "Engine",
    value: "bytes",
    defaultText: kvDefault("maxQueuedBytes"),
    description:
      "The same bound as --engine-kv-queue-batches in the batches' payload bytes (from 65536 to 2^32): " +
      "whichever is reached first drops the oldest. Raise both for a server whose batches are large.",
  }),
  adapters: setting(
    z
      .string()
      .max(64 * 257)
      .regex(/^[^\s,]{1,256}(,[^\s,]{1,256}){0,63}$/, "a comma-separated list of at most 64 adapter names")
      .optional(),
    {
      section: "Engine",
      value: "name,…",
      defaultText: "none",
      description:
        "LoRA adapters the engine serves besides its model (vLLM's `--lora-modules` names). A request names " +
        "one as its `model`, as with vLLM; each adapter is its own cache namespace.",
    },
  ),
  mixedModels: setting(bool.default(false), {
    section: "Engine",
    description:
      "Admit peers that serve other models (a mesh of mixed models): each node advertises its models in its " +
      "hello, a request runs only on a node serving its model, and a node that does not serve it routes it. " +
      "Off: a peer serving another model is refused, as a misconfiguration.",
  }),
  engineCacheMirror: setting(
    z.enum(CACHE_MIRRORS, { error: `must be one of ${CACHE_MIRRORS.join(", ")}` }).optional(),
    {
      section: "Engine",
      value: "kind",
      defaultText: engineDefault(O.cacheMirror),
      description:
        "openai engine without KV events: `llama-slots` mirrors a llama.cpp server's slots and RAM prompt " +
        "cache exactly (the node picks each request's slot), `lru` models any server's cache by LRU, `auto` " +
        "takes llama-slots when the server is llama.cpp's (its /props names slots), else LRU.",
    },
  ),
  engineCacheRam: setting(num(-1, 1 << 30, true).optional(), {
    section: "Engine",
    value: "MiB",
    defaultText: "`8192` (llama-server's)",
    description:
      "llama-slots: the server's `--cache-ram` in MiB (0 off, -1 no limit), so the node models the prompts " +
      "the server keeps in RAM and restores into slots.",
  }),
  engineSlotSaves: setting(num(0, 10_000, true).optional(), {
    section: "Engine",
    value: "n",
    defaultText: "`0` (none)",
    description:
      "llama-slots, with a server started with `--slot-save-path`: slot states the node saves on the server's " +
      "disk (at most this many files) and restores into a slot when one holds more of a prompt than the " +
      "server would find.",
  }),
  capacityTokens: setting(num(1, 1e9, true).optional(), {
    section: "Engine",
    value: "n",
    defaultText: "the engine's",
    description: "KV capacity in tokens that the node's radix tree models (and peers' estimates assume).",
  }),
  simProfile: setting(z.string().max(64).optional(), {
    section: "Engine",
    value: "name",
    defaultText: `\`${DEFAULT_PROFILE}\``,
    description: `sim engine: the cost profile (${PROFILE_NAMES.map((p) => `\`${p}\``).join(", ")}).`,
  }),
  simTimeScale: setting(num(0, 1000).default(1), {
    section: "Engine",
    value: "x",
    description: "sim engine: multiplies the modelled times (e.g. 0.05 makes multi-process tests fast).",
  }),
  threads: setting(num(1, 256, true).optional(), {
    section: "Engine",
    value: "n",
    defaultText: engineDefault(L.threads),
    description: "llamacpp engine: CPU threads (1 holds up best when several nodes share a machine).",
  }),
  slots: setting(num(1, 64, true).optional(), {
    section: "Engine",
    value: "n",
    defaultText: engineDefault(L.slots),
    description: "llamacpp engine: KV slots, i.e. prompts whose KV cache stays live at once.",
  }),
  savedStates: setting(num(0, 10_000, true).optional(), {
    section: "Engine",
    value: "n",
    defaultText: engineDefault(L.maxSavedStates),
    description:
      "llamacpp engine: saved sequence states kept, the second-level prefix cache (in /dev/shm when present).",
  }),
  slotContext: setting(num(64, 131_072, true).optional(), {
    section: "Engine",
    value: "n",
    defaultText: engineDefault(L.slotContext),
    description:
      "llamacpp engine: tokens per slot (prompt + output), the longest request; a longer one gets 400 " +
      "context_length_exceeded. Memory grows with slots × this.",
  }),
  calibrationMs: setting(num(0, 600_000).default(10_000), {
    section: "Engine",
    value: "ms",
    description:
      "Start-up calibration: before /ready says ready, a few short runs (two prompt lengths, cold and " +
      "cached, 8 output tokens each) measure the engine's costs for routing and for the costs this node " +
      "advertises to its peers; this bounds their total time (a request still going is aborted). 0 = off: the " +
      "costs are learned from served requests only.",
  }),
};
