/**
 * The remote engine's use of the server's `/tokenize`, in the shape the server takes (vLLM/SGLang or
 * llama.cpp), found once by a probe; and the local tokenizer it falls back to.
 */
import { z } from "zod";
import type { Tokens } from "../../core/engine.js";
import { EngineAbortedError, EngineInputError, EngineUnavailableError } from "../errors.js";
import type { HttpClient } from "../http-client.js";

/** Token ids are Uint32 here. */
const MAX_TOKEN_ID = 2 ** 32 - 1;

const TokenizeResponse = z.object({
  tokens: z.array(
    z.union([
      z.number().int().min(0).max(MAX_TOKEN_ID),
      z.object({ id: z.number().int().min(0).max(MAX_TOKEN_ID) }),
    ]),
  ),
});

const toTokens = (ts: z.infer<typeof TokenizeResponse>["tokens"]): Tokens =>
  Uint32Array.from(ts.map((t) => (typeof t === "number" ? t : t.id)));

/** Any non-empty text: every tokenizer turns it into at least one token. */
const TOKENIZE_PROBE = "Hello, world";

let localEncoder: Promise<(text: string) => number[]> | undefined;

/**
 * gpt-tokenizer's encoding of `text`, the module loaded at first use: its tables cost a node ≈ 20 MB
 * of heap and a slower start, and a server that tokenizes (llama.cpp, vLLM, SGLang) never needs them.
 */
export async function localTokens(text: string): Promise<Tokens> {
  // A client's "<|endoftext|>" is text, as in the workloads' encoder: by default gpt-tokenizer throws
  // on it, which failed the request as an internal error.
  const plain = { disallowedSpecial: new Set<string>() };
  localEncoder ??= import("gpt-tokenizer").then((m) => (t: string) => m.encode(t, plain));
  return Uint32Array.from((await localEncoder)(text));
}

export type TokenizeShape = "vllm" | "llamacpp" | "none";

/**
 * `shared` as one caller waits on it: rejected (EngineAbortedError) as soon as `signal` aborts, while
 * `shared` runs on for its other callers. Else a caller gone or past its bound would stay counted as
 * a running call (against --max-pending) until the shared work ended.
 */
function waitUnlessAborted<T>(shared: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return shared;
  if (signal.aborted) return Promise.reject(new EngineAbortedError());
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new EngineAbortedError());
    signal.addEventListener("abort", onAbort, { once: true });
    const settled = () => signal.removeEventListener("abort", onAbort);
    shared.then(
      (v) => {
        settled();
        resolve(v);
      },
      (e: unknown) => {
        settled();
        reject(e);
      },
    );
  });
}

export class RemoteTokenizer {
  private tokenizeShape: TokenizeShape | undefined;
  private tokenizeShapeFound: Promise<TokenizeShape> | undefined;

  constructor(
    private readonly http: HttpClient,
    /** The model named in vLLM/SGLang's body. */
    private readonly model: string,
  ) {}

  /** The shape, once found (undefined before). */
  get shape(): TokenizeShape | undefined {
    return this.tokenizeShape;
  }

  /**
   * The server's tokenize shape, found once with a fixed non-empty probe text: the vLLM/SGLang body
   * `{model, prompt}`, then llama.cpp's `{content}`. A shape counts only if the probe comes back as a
   * non-empty token list: llama.cpp's server answers a body without `content` with 200 and no tokens,
   * so "the request succeeded" says nothing.
   */
  detectShape(): Promise<TokenizeShape> {
    this.tokenizeShapeFound ??= (async () => {
      for (const shape of ["vllm", "llamacpp"] as const) {
        const tokens = await this.probeShape(shape, TOKENIZE_PROBE);
        if (tokens && tokens.length > 0) return shape;
      }
      return "none" as const;
    })().then(
      (shape) => {
        this.tokenizeShape = shape;
        return shape;
      },
      (e: unknown) => {
        // A transient failure (server down): detect again next time.
        this.tokenizeShapeFound = undefined;
        throw e;
      },
    );
    return this.tokenizeShapeFound;
  }

  /** A /tokenize request body in `shape`. */
  private tokenizeBody(shape: "vllm" | "llamacpp", text: string): object {
    return shape === "vllm"
      ? { model: this.model, prompt: text, add_special_tokens: true }
      : { content: text, add_special: true };
  }

  /** One probe in `shape`; undefined when the server rejects that shape (4xx, another body). */
  private async probeShape(shape: "vllm" | "llamacpp", text: string): Promise<Tokens | undefined> {
    try {
      const res = await this.http.json("POST", "/tokenize", this.tokenizeBody(shape, text));
      const parsed = TokenizeResponse.safeParse(res);
      return parsed.success ? toTokens(parsed.data.tokens) : undefined;
    } catch (e) {
      // 4xx: this shape (or the endpoint) is not supported; anything else is a real failure.
      if (!(e instanceof EngineInputError)) throw e;
      return undefined;
    }
  }

  /**
   * The server's tokens for `text`; undefined when it has no /tokenize that returns tokens. `signal`
   * aborts this request only: the shape probe is shared with other callers, so it is not aborted, but
   * this call stops waiting on it.
   */
  async tokenize(text: string, signal?: AbortSignal): Promise<Tokens | undefined> {
    const shape = this.tokenizeShape ?? (await waitUnlessAborted(this.detectShape(), signal));
    if (shape === "none") return undefined;
    // Once the shape is known, a 4xx is about this prompt (e.g. too long): the caller's error.
    const parsed = TokenizeResponse.safeParse(
      await this.http.json("POST", "/tokenize", this.tokenizeBody(shape, text), signal),
    );
    if (!parsed.success) throw new EngineUnavailableError("unexpected /tokenize response from the server");
    const tokens = toTokens(parsed.data.tokens);
    if (tokens.length === 0 && text.length > 0)
      throw new EngineUnavailableError("server's /tokenize returned no tokens for a non-empty prompt");
    return tokens;
  }
}
