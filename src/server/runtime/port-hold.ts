/**
 * The API and peer ports, held while the engine loads (which can take minutes for a large model):
 * a port clash is found at once, no other process can take a port meanwhile, and the API port says
 * the node is loading (503 with a JSON body) instead of refusing connections. The holders are
 * released just before the node's own servers bind the same addresses.
 */
import { createServer as createHttpServer, type ServerResponse } from "node:http";
import { createServer, type Server } from "node:net";
import { errorBody } from "../openai/format.js";
import { SettingsError, splitHostPort } from "../settings/index.js";
import { bound } from "./listen-error.js";

export interface PortToHold {
  flag: string;
  address: string;
  /** `api`: answer HTTP while held; `peer`: close each connection (a peer sees it unreachable). */
  role: "api" | "peer";
}

export interface HeldPorts {
  /** Lets every address go; resolves once each can be bound again. */
  release(): Promise<void>;
}

/** While loading, the client port answers in the API's own shapes, all 503: not yet serving. */
const RETRY_AFTER_SEC = 5;
const LOADING = "the node is starting: its engine is loading";

function answerLoading(nodeId: string, url: string | undefined, res: ServerResponse): void {
  const path = (url ?? "/").split("?")[0];
  const body =
    path === "/health"
      ? { status: "loading", node: nodeId }
      : path === "/ready"
        ? { ready: false, node: nodeId, detail: LOADING }
        : errorBody(LOADING, "server_error", null, null);
  res.writeHead(503, {
    "content-type": "application/json; charset=utf-8",
    "retry-after": String(RETRY_AFTER_SEC),
    connection: "close",
  });
  res.end(JSON.stringify(body));
}

function holder(role: PortToHold["role"], nodeId: string): Server {
  if (role === "peer") return createServer((socket) => socket.destroy());
  return createHttpServer((req, res) => answerLoading(nodeId, req.url, res));
}

function listen(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host, port, exclusive: true }, () => {
      server.off("error", reject);
      resolve();
    });
  });
}

function close(server: Server): Promise<void> {
  return new Promise((res) => {
    server.close(() => res());
    // An HTTP client keeping its socket alive must not hold the port past the release.
    (server as Server & { closeAllConnections?: () => void }).closeAllConnections?.();
  });
}

/**
 * Binds every address (port 0: none) or throws `bound`'s error naming the flag of the first that will
 * not bind; on a throw nothing stays held.
 */
export async function holdPorts(ports: readonly PortToHold[], nodeId: string): Promise<HeldPorts> {
  const fixed = ports.filter((p) => splitHostPort(p.address).port !== 0);
  const [a, b] = fixed;
  if (a && b && a.address === b.address)
    throw new SettingsError(`${a.flag} and ${b.flag} are the same address ${a.address}`);
  // All held at once, so two flags naming one port clash here too.
  const held: Server[] = [];
  const release = async () => {
    await Promise.all(held.splice(0).map(close));
  };
  try {
    for (const [i, p] of fixed.entries()) {
      const { host, port } = splitHostPort(p.address);
      const server = holder(p.role, nodeId);
      await bound(p.flag, p.address, listen(server, host, port)).catch((err: { exitCode?: number }) => {
        // Held by our other flag (one port on a wildcard and a host, or two names of one host): the
        // flags must change, which "another process" and a retry (exit 1) would not say.
        const mine = fixed.slice(0, i).find((q) => splitHostPort(q.address).port === port);
        if (mine && err.exitCode === 1)
          throw new SettingsError(
            `${mine.flag} ${mine.address} and ${p.flag} ${p.address} share port ${port}`,
          );
        throw err;
      });
      held.push(server);
    }
  } catch (err) {
    await release();
    throw err;
  }
  return { release };
}
