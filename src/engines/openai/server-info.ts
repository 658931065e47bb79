/**
 * What the remote engine reads about the server beyond its runs: the context limit per request
 * (`/v1/models`, else llama.cpp's `/props`), whether it is a server known to ignore `cache_salt`, and
 * whether its slots can be mirrored (a llama.cpp server).
 */
import { z } from "zod";
import type { EngineRequest } from "../../core/engine.js";
import { EngineInputError, EngineUnavailableError } from "../errors.js";
import type { HttpClient } from "../http-client.js";
import { LlamaSlotCache } from "../llama-slots/slot-cache.js";
import { MAX_CONTEXT_TOKENS, type OpenAIEngineOptionsSchema } from "./options.js";

const ContextTokens = z.number().int().min(1).max(MAX_CONTEXT_TOKENS);
/** `/v1/models`: vLLM and SGLang say `max_model_len`, llama.cpp's server `meta.n_ctx` (per slot). */
const ModelsResponse = z.object({
  data: z
    .array(
      z.object({
        id: z.string(),
        max_model_len: ContextTokens.nullish().catch(undefined),
        meta: z
          .object({ n_ctx: ContextTokens.nullish().catch(undefined) })
          .nullish()
          .catch(undefined),
      }),
    )
    .max(10_000),
});
/** llama.cpp's server `/props`: the context of one slot. */
const PropsResponse = z.object({
  default_generation_settings: z.object({ n_ctx: ContextTokens }),
});

/** The context limit the server reports for `model`; undefined when it reports none. */
export async function fetchServerContext(http: HttpClient, model: string): Promise<number | undefined> {
  const models = ModelsResponse.safeParse(await getOptional(http, "/v1/models"));
  if (models.success) {
    const { data } = models.data;
    const mine = data.find((m) => m.id === model) ?? (data.length === 1 ? data[0] : undefined);
    const n = mine?.max_model_len ?? mine?.meta?.n_ctx;
    if (n) return n;
  }
  const props = PropsResponse.safeParse(await getOptional(http, "/props"));
  return props.success ? props.data.default_generation_settings.n_ctx : undefined;
}

/** Asking waits at most this: a silent server holds a tenant's run, or the health check, no longer. */
const PROBE_MS = 10_000;
/** A server answering a probe path with these after the retries may be starting or overloaded: ask again. */
const PROBE_TRANSIENT = new Set([408, 429, 502, 503, 504]);

/**
 * Whether the server is one known to ignore `cache_salt` (Ollama's `/api/version`, llama-server's
 * `/props`): `ignoredBy` names it. A server down when asked is asked again (`unknown`) before a salted
 * or adapter run, and by the health check, so a tenant's run never reaches one that would share its cache.
 */
export class SaltSupport {
  ignoredBy: string | undefined;
  unknown = false;
  /** Why the last asking failed, for the refused run's error. */
  private failure = "";
  /** The asking in flight: concurrent runs and the health check share it rather than each ask. */
  private asking: Promise<void> | undefined;

  constructor(private readonly http: HttpClient) {}

  learn(): Promise<void> {
    if (!this.asking) {
      this.asking = this.ask().finally(() => {
        this.asking = undefined;
      });
    }
    return this.asking;
  }

  private async ask(): Promise<void> {
    const signal = AbortSignal.timeout(PROBE_MS);
    try {
      const version = await probe(this.http, "/api/version", signal);
      if (version && typeof (version as { version?: unknown }).version === "string")
        this.ignoredBy = "Ollama";
      else {
        const props = await probe(this.http, "/props", signal);
        if (props && typeof (props as { total_slots?: unknown }).total_slots === "number")
          this.ignoredBy = "llama-server (without the slot mirror: cacheMirror lru)";
      }
      this.unknown = false;
    } catch (e) {
      // Down now (or silent past the bound): nothing known.
      this.unknown = true;
      this.failure = signal.aborted ? `no answer within ${PROBE_MS} ms` : (e as Error).message;
    }
  }

  /** Before a run: a namespaced run needs the answer; unreachable, it fails rather than risk sharing. */
  async known(r: Pick<EngineRequest, "cacheSalt" | "adapter">): Promise<void> {
    if (!this.unknown || (r.cacheSalt === undefined && r.adapter === undefined)) return;
    await this.learn();
    if (this.unknown) {
      throw new EngineUnavailableError(
        `the server has not answered whether it keeps tenants apart (${this.failure.slice(0, 200)})`,
      );
    }
  }
}

/**
 * A probe path the server answers with a lasting server error (a gateway's, for a path it lacks) is
 * absent there: otherwise every salted run would fail for as long as the server runs.
 */
async function probe(http: HttpClient, path: string, signal: AbortSignal): Promise<unknown> {
  try {
    return await getOptional(http, path, signal);
  } catch (e) {
    if (e instanceof EngineUnavailableError && e.status !== undefined && !PROBE_TRANSIENT.has(e.status))
      return undefined;
    // An answer too large for either server's is neither's, as one that is not JSON is.
    if (e instanceof EngineUnavailableError && /response body larger than/.test(e.message)) return undefined;
    throw e;
  }
}

/** GET a JSON endpoint the server may lack: undefined on 4xx or a body that is not JSON. */
async function getOptional(http: HttpClient, path: string, signal?: AbortSignal): Promise<unknown> {
  try {
    return await http.json("GET", path, undefined, signal);
  } catch (e) {
    if (e instanceof EngineInputError) return undefined;
    if (e instanceof EngineUnavailableError && /not JSON/.test(e.message)) return undefined;
    throw e;
  }
}

/**
 * The slot mirror of a llama.cpp server when the server is one (`cacheMirror` "auto" or "llama-slots");
 * undefined where the server's cache is modelled by LRU. With "llama-slots", a server that is not one
 * (or is down) fails, as does a local tokenizer: the mirror needs the server's tokens.
 */
export async function detectSlotMirror(
  http: HttpClient,
  opts: Pick<z.output<typeof OpenAIEngineOptionsSchema>, "cacheMirror" | "tokenizer" | "llamaSlots">,
  log?: (msg: string, fields: Record<string, unknown>) => void,
): Promise<LlamaSlotCache | undefined> {
  const wanted = opts.cacheMirror === "llama-slots";
  if (opts.tokenizer === "local") {
    if (wanted)
      throw new Error("cacheMirror llama-slots needs the server's tokens (tokenizer auto or server)");
    return undefined;
  }
  let slots: LlamaSlotCache | undefined;
  try {
    slots = await LlamaSlotCache.detect(http, opts.llamaSlots);
  } catch (e) {
    if (wanted) throw e;
    log?.("the server did not answer: its cache is modelled by LRU (restart the node to mirror its slots)", {
      error: (e as Error).message,
    });
    return undefined;
  }
  if (!slots && wanted)
    throw new Error("cacheMirror llama-slots: the server's /props names no slots (not a llama.cpp server)");
  return slots;
}
