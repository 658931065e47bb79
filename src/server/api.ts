/**
 * The client-facing HTTP API (fastify): OpenAI-compatible completions/chat (JSON and SSE), models,
 * health/readiness, Prometheus metrics, the node's cluster view and a small dashboard. It parses,
 * validates and formats; serving (routing, engines) is the NodeService's job.
 */
import { randomUUID } from "node:crypto";
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { ChatMessage } from "../core/engine.js";
import { registerAdmin } from "./admin-routes.js";
import { registerDashboard } from "./dashboard.js";
import type { NodeMetrics } from "./metrics.js";
import { installRequestLog, noteError } from "./observability/request-log.js";
import { createApiApp } from "./openai/api-app.js";
import { BadRequest, installErrorHandler } from "./openai/api-errors.js";
import { DEADLINE_HEADER, parseDeadlineHeader } from "./openai/deadline-header.js";
import {
  type ApiKind,
  CONTEXT_LENGTH_EXCEEDED,
  errorBody,
  fullResponse,
  prefixmeshField,
  type ResponseMeta,
  serverTiming,
  streamChunk,
  timingMs,
  usageChunk,
} from "./openai/format.js";
import { hangUpSignal } from "./openai/hang-up.js";
import { type ModelRoute, modelEntry, modelList, resolveModel } from "./openai/models.js";
import { installNotFound } from "./openai/route-methods.js";
import {
  type ChatRequest,
  type CompletionRequest,
  chatRequestSchema,
  completionRequestSchema,
  describeZodError,
  tokenizeRequestSchema,
} from "./openai/schemas.js";
import { failedOutcome } from "./request-outcome.js";
import {
  type Admission,
  type ClientLink,
  type InferenceInput,
  type NodeService,
  type ServeOutcome,
  ServiceError,
} from "./service.js";

export interface ApiOptions {
  service: NodeService;
  metrics: NodeMetrics;
  logger?: FastifyBaseLogger;
  /** Largest request body accepted, bytes (413 above). */
  bodyLimit?: number;
  /** Default max_tokens when the client gives none (OpenAI's completions default is 16). */
  defaultMaxTokens?: number;
  /** Default max_tokens of a chat request that gives none; default: fill the context (OpenAI's). */
  chatDefaultMaxTokens?: number;
  /** Largest max_tokens accepted (400 above); default: the context bounds it alone. */
  maxTokensCeiling?: number;
  /** Share of successful client requests given a log line (refusals and failures always get one). */
  requestLogSample?: number;
}

export function buildApi(opts: ApiOptions): FastifyInstance {
  const { service, metrics } = opts;
  const counted = new WeakSet<FastifyReply>();
  const app = createApiApp(opts.bodyLimit);
  installRequestLog(app, { logger: opts.logger, sample: opts.requestLogSample });

  installErrorHandler(app, opts.logger);
  // Before the routes: it records each route's methods as they are added.
  installNotFound(app);

  // While shutting down, tell keep-alive clients to reconnect elsewhere instead of reusing this socket.
  // Callback style: an async hook costs a promise and a microtask hop on every response.
  app.addHook("onSend", (_req, reply, payload, done) => {
    if (!service.ready().ok) reply.header("connection", "close");
    done(null, payload);
  });

  app.get("/health", async () => ({ status: "ok", node: service.nodeId }));
  app.get("/ready", async (req, reply) => {
    const r = service.ready();
    if (!r.ok) noteError(req, "not_ready", r.detail ?? "not ready");
    return reply
      .status(r.ok ? 200 : 503)
      .send({ ready: r.ok, node: service.nodeId, detail: r.detail ?? null });
  });
  app.get("/metrics", async (_req, reply) => {
    reply.header("content-type", metrics.registry.contentType);
    return metrics.registry.metrics();
  });
  app.get("/cluster", async () => service.clusterView());
  registerDashboard(app);
  app.get("/v1/models", async () => ({
    object: "list",
    data: modelList(service),
  }));
  // OpenAI's "retrieve model"; a wildcard, for ids with a slash (org/name) that clients send raw.
  app.get<{ Params: { "*": string } }>("/v1/models/*", async (req) => {
    checkModel(req.params["*"]);
    return modelEntry(service, req.params["*"]);
  });

  // The model's own token count of a text, so a client can tell beforehand whether a prompt fits.
  // Taken in like a completion: the same tokenizing work, so bounded by --max-pending and drained.
  app.post("/tokenize", async (req, reply) => {
    const parsed = tokenizeRequestSchema.safeParse(req.body);
    if (!parsed.success) throw invalid(parsed.error);
    if (parsed.data.model !== undefined) checkModel(parsed.data.model);
    const text = parsed.data.prompt ?? parsed.data.content ?? "";
    const tokens = await admitted(() => service.tokenize(text, hangUpSignal(reply.raw)));
    return { tokens: Array.from(tokens), count: tokens.length, max_model_len: service.maxContextTokens };
  });

  registerAdmin(app, service);

  app.post("/v1/completions", async (req, reply) => {
    const parsed = completionRequestSchema.safeParse(req.body);
    if (!parsed.success) throw invalid(parsed.error);
    const body: CompletionRequest = parsed.data;
    noteRequest(req, body);
    const route = checkModel(body.model);
    const prompt = Array.isArray(body.prompt) ? (body.prompt[0] ?? "") : body.prompt;
    const asked = body.max_tokens ?? undefined;
    const maxTokens = asked ?? opts.defaultMaxTokens ?? 16;
    return admitted(async (admission) => {
      const gone = hangUpSignal(reply.raw);
      const input = await prepare(prompt, body, maxTokens, asked === undefined, route, gone);
      return serve("completion", reply, body, input, admission);
    }, reply);
  });

  app.post("/v1/chat/completions", async (req, reply) => {
    const parsed = chatRequestSchema.safeParse(req.body);
    if (!parsed.success) throw invalid(parsed.error);
    const body: ChatRequest = parsed.data;
    noteRequest(req, body);
    const route = checkModel(body.model);
    // The whole conversation after the template is the routing key, so chats sharing history route together.
    const messages: ChatMessage[] = body.messages.map((m) => ({
      role: m.role,
      content: typeof m.content === "string" ? m.content : (m.content ?? []).map((p) => p.text).join(""),
    }));
    return admitted(async (admission) => {
      const gone = hangUpSignal(reply.raw);
      const prompt = await service.applyChatTemplate(messages, gone);
      checkClient(reply);
      const asked = body.max_completion_tokens ?? body.max_tokens ?? undefined;
      const input = await prepare(
        prompt,
        body,
        asked ?? opts.chatDefaultMaxTokens ?? service.maxContextTokens,
        asked === undefined,
        route,
        gone,
      );
      // Another model's node serves it: the prompt above is in our model's template, not its.
      if (input.tokenizer !== undefined) input.messages = messages;
      return serve("chat", reply, body, input, admission);
    }, reply);
  });

  /**
   * A client request taken in (NodeService.admit) while `work` templates, tokenizes and submits it:
   * a shutdown that begins meanwhile drains it instead of failing it at once. A completion (its
   * `reply`; none: a `/tokenize`, which serves nothing) refused here (overload, shutdown, starting), or
   * failed before submit counted it (a template or tokenize step, a prompt too long), counts once.
   */
  async function admitted<T>(
    work: (admission: Admission | undefined) => Promise<T>,
    reply?: FastifyReply,
  ): Promise<T> {
    let admission: Admission | undefined;
    try {
      admission = service.admit?.(reply !== undefined);
      return await work(admission);
    } catch (err) {
      if (reply && !counted.has(reply)) count(reply, failedOutcome(err));
      throw err;
    } finally {
      admission?.end();
    }
  }

  /** A completion's one count in prefixmesh_requests_total: `counted` keeps a second one out. */
  function count(reply: FastifyReply, outcome: string, route = "none"): void {
    counted.add(reply);
    metrics.requests.inc({ outcome, route });
  }

  /** Hung up while its prompt was templated or tokenized (499): nobody to go on for, no slot to hold. */
  function checkClient(reply: FastifyReply): void {
    if (!reply.raw.destroyed) return;
    count(reply, "gone");
    throw new ServiceError(499, "aborted", "client gone");
  }

  function invalid(err: import("zod").ZodError): BadRequest {
    const d = describeZodError(err);
    return new BadRequest(400, d.message, d.param);
  }

  function noteRequest(req: FastifyRequest, body: CompletionRequest | ChatRequest): void {
    req.logFields.model = body.model;
    req.logFields.stream = body.stream === true;
  }

  /** How `model` is served (resolveModel); 404 for a model no node of the mesh serves. */
  function checkModel(model: string): ModelRoute {
    const route = resolveModel(service, model);
    if (route === undefined) {
      throw new BadRequest(
        404,
        `model '${model}' does not exist: no node of this mesh serves it (this node serves '${service.modelId}'; GET /v1/models lists the mesh's)`,
        "model",
        "model_not_found",
      );
    }
    return route;
  }

  async function prepare(
    prompt: string,
    body: CompletionRequest | ChatRequest,
    maxTokens: number,
    defaulted = false,
    route: ModelRoute = {},
    gone?: AbortSignal,
  ): Promise<InferenceInput> {
    const ceiling = opts.maxTokensCeiling;
    if (!defaulted && ceiling !== undefined && maxTokens > ceiling) {
      throw new BadRequest(
        400,
        `max_tokens (${maxTokens}) exceeds this node's ceiling of ${ceiling}`,
        "max_tokens",
        "max_tokens_exceeded",
      );
    }
    const tokens = await service.tokenize(prompt, gone);
    const limit = service.maxContextTokens;
    if (tokens.length === 0) throw new BadRequest(400, "prompt is empty", "prompt");
    if (tokens.length >= limit) {
      throw new BadRequest(
        400,
        `prompt has ${tokens.length} tokens; this model's context is ${limit}`,
        "prompt",
        CONTEXT_LENGTH_EXCEEDED,
      );
    }
    // No limit asked: the default, at most what the context leaves (and the ceiling).
    const max = defaulted ? Math.min(maxTokens, limit - tokens.length, ceiling ?? maxTokens) : maxTokens;
    if (tokens.length + max > limit) {
      throw new BadRequest(
        400,
        `prompt (${tokens.length} tokens) + max_tokens (${max}) exceeds this model's context of ${limit}`,
        "max_tokens",
        CONTEXT_LENGTH_EXCEEDED,
      );
    }
    const input: InferenceInput = { prompt, tokens, maxTokens: max };
    if (body.temperature != null) input.temperature = body.temperature;
    if (body.top_p != null) input.topP = body.top_p;
    if (body.seed != null) input.seed = body.seed;
    if (body.presence_penalty) input.presencePenalty = body.presence_penalty;
    if (body.frequency_penalty) input.frequencyPenalty = body.frequency_penalty;
    if (body.stop) input.stop = body.stop;
    if (body.cache_salt != null) input.cacheSalt = body.cache_salt;
    Object.assign(input, route);
    return input;
  }

  async function serve(
    kind: ApiKind,
    reply: FastifyReply,
    body: CompletionRequest | ChatRequest,
    input: InferenceInput,
    admission?: Admission,
  ) {
    const started = performance.now();
    const meta: ResponseMeta = {
      id: `${kind === "chat" ? "chatcmpl" : "cmpl"}-${randomUUID()}`,
      created: Math.floor(Date.now() / 1000),
      model: input.model ?? service.modelId,
    };
    const req = reply.request;
    input.requestId = req.requestId;
    const deadline = parseDeadlineHeader(req.headers[DEADLINE_HEADER]);
    if (typeof deadline === "object")
      throw new BadRequest(400, deadline.error, DEADLINE_HEADER, "invalid_deadline");
    if (deadline !== undefined) input.deadlineMs = deadline;
    const link: ClientLink = {};
    checkClient(reply);
    reply.raw.on("close", () => {
      if (!reply.raw.writableFinished) link.onGone?.();
    });
    metrics.promptTokens.inc(input.tokens.length);
    const done = (outcome: string, o?: ServeOutcome) => {
      const route = o ? (o.hops === 0 ? "local" : "forwarded") : "none";
      count(reply, outcome, route);
      req.logFields.promptTokens = input.tokens.length;
      if (!o) return;
      metrics.latency.observe({ route }, (performance.now() - started) / 1000);
      metrics.servedBy.inc({ served_by: o.servedBy });
      metrics.phases.observe({ phase: "queue" }, o.timing.queueMs / 1000);
      metrics.phases.observe({ phase: "prefill" }, o.timing.prefillMs / 1000);
      metrics.phases.observe({ phase: "decode" }, o.timing.decodeMs / 1000);
      metrics.phases.observe({ phase: "network" }, o.timing.networkMs / 1000);
      const f = req.logFields;
      f.servedBy = o.servedBy;
      f.hops = o.hops;
      f.cachedTokens = o.result.cachedTokens;
      f.completionTokens = o.result.completionTokens;
      f.fallbacks = o.fallbacks;
    };
    const headersFor = (servedBy: string, hops = servedBy === service.nodeId ? 0 : 1) => ({
      "x-prefixmesh-served-by": servedBy,
      "x-prefixmesh-hops": String(hops),
      "x-request-id": req.requestId,
    });

    if (!body.stream) {
      let o: ServeOutcome;
      try {
        o = await service.submit(input, {}, link, admission);
      } catch (err) {
        done(failedOutcome(err));
        throw err;
      }
      done("ok", o);
      reply.headers(headersFor(o.servedBy, o.hops));
      const timing = timingMs(o.timing);
      reply.header("server-timing", serverTiming(timing));
      return reply.send(fullResponse(kind, meta, o, timing));
    }

    // Streaming: headers wait for the first chunk (or the result), so a request refused before any output
    // (overload, all routes failed) still gets a proper HTTP error status.
    const raw = reply.raw;
    let started_ = false;
    let first = true;
    const startStream = (servedBy: string) => {
      if (started_) return;
      started_ = true;
      reply.hijack();
      // No `connection` header of our own: Node's says keep-alive or close as the client asked.
      raw.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        ...headersFor(servedBy),
      });
    };
    const send = (obj: unknown) => raw.write(`data: ${JSON.stringify(obj)}\n\n`);
    let outcome: ServeOutcome;
    try {
      outcome = await service.submit(
        input,
        {
          onChunk(text, servedBy) {
            startStream(servedBy);
            send(streamChunk(kind, meta, { text, first, servedBy }));
            first = false;
          },
        },
        link,
        admission,
      );
    } catch (err) {
      done(failedOutcome(err));
      if (!started_) throw err;
      // Output already went out: all we can do is say so in-band and end without [DONE].
      const e =
        err instanceof ServiceError ? err : new ServiceError(500, "server_error", (err as Error).message);
      noteError(req, e.code ?? e.type, e.message);
      send(errorBody(e.message, e.type));
      raw.end();
      return reply;
    }
    done("ok", outcome);
    startStream(outcome.servedBy);
    if (first && kind === "chat")
      send(streamChunk(kind, meta, { text: "", first: true, servedBy: outcome.servedBy }));
    const whole = prefixmeshField(outcome);
    send(
      streamChunk(
        kind,
        meta,
        { finishReason: outcome.result.finishReason, servedBy: outcome.servedBy },
        whole,
      ),
    );
    if (body.stream_options?.include_usage) send(usageChunk(kind, meta, outcome, whole));
    raw.end("data: [DONE]\n\n");
    return reply;
  }

  return app;
}
