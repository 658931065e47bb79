/**
 * One log line per client request (pino, at the entry node): its id, model, status, which node served
 * it, hops, cached tokens and duration; refusals (4xx, a body fastify rejected, a bad `x-request-id`)
 * and failures (5xx, an error sent in-band on a stream) always, successes sampled by
 * `--request-log-sample`. Operations routes (`/health`, `/ready`, `/metrics`, `/cluster`, the
 * dashboard) are logged only when they fail: scrapes every few seconds would drown the rest. A `/ready`
 * 503 is the node's state, not a failure: logged at info when it changes, else at debug, or a probe
 * every few seconds while a model loads would fill the log with warnings.
 *
 * The line is written when the response's socket side closes, so it covers hijacked (streaming)
 * replies, clients that hung up (499) and connections the server cut (the status it meant), which
 * fastify's own hooks do not.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { serverCutStatus } from "../../net/server-cuts.js";
import { errorBody } from "../openai/format.js";
import { chooseRequestId, REQUEST_ID_HEADER } from "./request-id.js";

/** The status a request line says for a client gone before any answer was sent (nginx's). */
const CLIENT_GONE_STATUS = 499;

/** What a handler learnt about its request, for the log line (filled as the request goes). */
export interface RequestLogFields {
  model?: string;
  stream?: boolean;
  promptTokens?: number;
  completionTokens?: number;
  cachedTokens?: number;
  servedBy?: string;
  hops?: number;
  fallbacks?: number;
  /** The OpenAI error code (or type) of a refusal or failure, and its message. */
  error?: string;
  errorMessage?: string;
}

declare module "fastify" {
  interface FastifyRequest {
    /** The client's `x-request-id` when valid, else one made here (request-id.ts). */
    requestId: string;
    logFields: RequestLogFields;
  }
}

export interface RequestLogLogger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

export interface RequestLogOptions {
  /** Where lines go; none: ids are still given and returned, nothing is logged. */
  logger?: RequestLogLogger | undefined;
  /** Share of successful client requests logged, 0…1 (refusals and failures: always). */
  sample?: number | undefined;
  /** Uniform in [0, 1) (tests pass their own). */
  random?: () => number;
}

const MAX_PATH = 256;
const round3 = (x: number) => Math.round(x * 1000) / 1000;

/** A request a client makes to be served (not an operator's probe, scrape or page). */
export function isClientRoute(method: string, path: string): boolean {
  return method !== "GET" || path.startsWith("/v1/");
}

/** Records a refusal or failure on the request, for its log line. */
export function noteError(req: FastifyRequest, code: string, message: string): void {
  const f = req.logFields;
  if (!f) return;
  f.error = code;
  f.errorMessage = message.length > 512 ? `${message.slice(0, 512)}…` : message;
}

export function installRequestLog(app: FastifyInstance, opts: RequestLogOptions): void {
  const sample = opts.sample ?? 1;
  const random = opts.random ?? Math.random;
  const logger = opts.logger;
  // The last /ready answer's status and detail: a repeat of it is logged at debug.
  let lastReady: string | undefined;
  app.decorateRequest("requestId", "");
  app.decorateRequest("logFields", null as unknown as RequestLogFields);

  // Callback style: an async hook costs a promise and a microtask hop on every request.
  app.addHook("onRequest", (req, reply, done) => {
    const choice = chooseRequestId(req.headers[REQUEST_ID_HEADER]);
    req.requestId = choice.id;
    req.logFields = {};
    reply.header(REQUEST_ID_HEADER, choice.id);
    if (logger) {
      const started = performance.now();
      reply.raw.once("close", () => writeLine(req, reply, performance.now() - started));
    }
    if (!choice.ok) {
      noteError(req, "invalid_request_id", choice.error);
      reply
        .code(400)
        .send(errorBody(choice.error, "invalid_request_error", REQUEST_ID_HEADER, "invalid_request_id"));
      return;
    }
    done();
  });

  function writeLine(req: FastifyRequest, reply: FastifyReply, ms: number): void {
    if (!logger) return;
    const raw = reply.raw;
    // The answer never completed. Cut by the server itself (a refusal written raw, its shutdown): the
    // status it meant. Else the client hung up: before any of it was sent, nginx's 499, not the 200 a
    // response not written yet holds. Either way the line is never sampled out.
    const cut = raw.writableFinished ? undefined : serverCutStatus(app.server, req.raw);
    const gone = !raw.writableFinished && cut === undefined;
    const status = !raw.writableFinished && !raw.headersSent ? (cut ?? CLIENT_GONE_STATUS) : raw.statusCode;
    const f = req.logFields;
    const failed = status >= 400 || f.error !== undefined || !raw.writableFinished;
    const path = (req.url.split("?")[0] ?? "").slice(0, MAX_PATH);
    // Ready again: the next 503 is a change.
    if (path === "/ready" && status !== 503) lastReady = undefined;
    if (!failed && (!isClientRoute(req.method, path) || !(random() < sample))) return;
    const line = {
      requestId: req.requestId,
      method: req.method,
      path,
      status,
      durationMs: round3(ms),
      client: req.ip,
      ...f,
      ...(gone ? { clientGone: true } : {}),
      ...(cut !== undefined ? { serverCut: true } : {}),
    };
    if (path === "/ready" && req.method === "GET" && status === 503) {
      const state = `${status} ${f.errorMessage ?? ""}`;
      const changed = state !== lastReady;
      lastReady = state;
      if (changed) logger.info(line, "request");
      else logger.debug(line, "request");
      return;
    }
    if (status >= 500) logger.warn(line, "request");
    else logger.info(line, "request");
  }
}
