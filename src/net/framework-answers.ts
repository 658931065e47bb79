/**
 * The answers a port gives to requests that never reach its routes: malformed HTTP (Node's parser),
 * headers too large or too slow, a URL fastify cannot decode, a request arriving while the server
 * closes. fastify's defaults answer these in its own `{statusCode, error, message}` shape; a client of
 * either port must be able to read every error it can provoke in that port's documented shape (the
 * client port's OpenAI shape, the peer port's `{error}`), so each port passes its own `ErrorBody`.
 */
import { maxHeaderSize } from "node:http";
import type { Duplex } from "node:stream";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { rawJsonResponse } from "./connection-limit.js";
import { methodInPacket } from "./request-line.js";
import { noteServerCut } from "./server-cuts.js";

/** A port's error body for `message` answered with `status`. */
export type ErrorBody = (message: string, status: number) => object;

/** What Node's parser reports (`rawPacket`: the bytes it was reading when it gave up). */
type ClientError = NodeJS.ErrnoException & { rawPacket?: unknown };

/**
 * The method of the request whose headers Node had parsed when the error came (its body was cut short
 * or malformed), from the parser Node keeps on the socket; undefined if it had none.
 */
function methodInProgress(socket: Duplex): string | undefined {
  const incoming = requestInProgress(socket);
  return typeof incoming?.method === "string" ? incoming.method : undefined;
}

/** The request whose headers Node had parsed and whose body it was still reading, if any. */
function requestInProgress(socket: Duplex): { method?: unknown } | undefined {
  const incoming = (socket as { parser?: { incoming?: { method?: unknown; complete?: boolean } | null } })
    .parser?.incoming;
  return incoming && !incoming.complete ? incoming : undefined;
}

/** The status and a message a caller can act on, for an error Node's HTTP server reports. */
export function describeClientError(err: ClientError): { status: number; message: string } {
  if (err.code === "ERR_HTTP_REQUEST_TIMEOUT")
    return { status: 408, message: "the request did not arrive in time; the connection is closed" };
  if (err.code === "HPE_HEADER_OVERFLOW")
    return { status: 431, message: `request headers too large (limit ${maxHeaderSize} bytes)` };
  const reason = (err as { reason?: unknown }).reason;
  const detail = typeof reason === "string" && reason.length > 0 ? reason : err.message;
  return { status: 400, message: `malformed HTTP request: ${detail}` };
}

/**
 * Answers a `clientError` on `socket` in the port's shape and closes the connection. A HEAD request's
 * answer has no body (HTTP forbids one: a keep-alive client would read it as the next response).
 */
export function answerClientError(err: ClientError, socket: Duplex, body: ErrorBody): void {
  // A reset connection has nobody to answer (and is not our error).
  if (err.code === "ECONNRESET" || socket.destroyed) return;
  const { status, message } = describeClientError(err);
  const head = (methodInPacket(err.rawPacket) ?? methodInProgress(socket)) === "HEAD";
  if (socket.writable) socket.write(rawJsonResponse(status, body(message, status), {}, head));
  // Only the request being read meant this status: one answered earlier on a kept-alive connection and
  // still waiting (pipelined) is not the one refused.
  const refused = requestInProgress(socket);
  if (refused) noteServerCut(refused, status);
  socket.destroy();
}

/**
 * fastify's options that put its own refusals in the port's shape: `clientErrorHandler` (Node's parser
 * errors, 408, 431), `frameworkErrors` (a URL that is no valid percent-encoding), no built-in 503
 * while closing, and no bodiless 400 from Node for a missing Host (`refuseBeforeRoutes` answers
 * both instead). A TLS server takes `REQUIRE_NO_HOST` in its `https` options too.
 */
export function frameworkAnswerOptions(body: ErrorBody) {
  return {
    clientErrorHandler: (err: Error, socket: Duplex) => answerClientError(err, socket, body),
    frameworkErrors: (err: Error, _req: FastifyRequest, reply: FastifyReply) => {
      reply.status(400).send(body(err.message, 400));
    },
    return503OnClosing: false,
    http: REQUIRE_NO_HOST,
  };
}

/** Node's own check answers a missing Host with an empty 400; `refuseBeforeRoutes` makes it. */
export const REQUIRE_NO_HOST = { requireHostHeader: false };

/**
 * Refusals before any route, in the port's shape: an HTTP/1.1 request without Host (400, as HTTP
 * requires), and one arriving on a kept-alive connection while `app` closes (503 with Retry-After
 * and `Connection: close`; fastify's own would be `{statusCode, error, message}`).
 */
export function refuseBeforeRoutes(app: FastifyInstance, body: ErrorBody): void {
  let closing = false;
  app.addHook("preClose", (done) => {
    closing = true;
    done();
  });
  app.addHook("onRequest", (req, reply, done) => {
    const raw = req.raw;
    if (raw.headers.host === undefined && raw.httpVersionMajor === 1 && raw.httpVersionMinor === 1) {
      reply
        .status(400)
        .header("connection", "close")
        .send(body("an HTTP/1.1 request needs a Host header", 400));
      return;
    }
    if (!closing) return done();
    const message = "this node is shutting down; retry on another";
    reply.status(503).header("retry-after", "1").header("connection", "close").send(body(message, 503));
  });
}
