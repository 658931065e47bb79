/**
 * An on-path attacker for peer answers: an HTTP relay on 127.0.0.1 that passes each request to its
 * target as it came and hands the whole answer (status, headers, body) to `tamper` before passing
 * back what it returns. Answers are buffered whole, so only for exchanges that end by themselves.
 */
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { type AddressInfo, connect, createServer as createTcpServer, type Socket } from "node:net";
import { request } from "undici";

export interface Answer {
  /** Which exchange this is on the relay (0-based), and its request. */
  n: number;
  method: string;
  path: string;
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

const HOP_BY_HOP = new Set(["connection", "keep-alive", "transfer-encoding", "content-length", "host"]);

function plain(h: IncomingHttpHeaders | Record<string, string | string[] | undefined>) {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined || HOP_BY_HOP.has(k.toLowerCase())) continue;
    out[k.toLowerCase()] = Array.isArray(v) ? v.join(", ") : v;
  }
  return out;
}

export async function onPathRelay(
  target: string,
  tamper: (a: Answer) => Answer = (a) => a,
): Promise<{ url: string; answers: Answer[]; close(): Promise<void> }> {
  const answers: Answer[] = [];
  let n = 0;
  const server: Server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on("data", (c: Buffer) => parts.push(c));
    req.on("end", () => {
      const i = n++;
      const body = Buffer.concat(parts);
      void (async () => {
        try {
          const up = await request(`${target}${req.url}`, {
            method: req.method as "GET" | "POST",
            headers: plain(req.headers),
            ...(body.length > 0 ? { body } : {}),
          });
          const got: Answer = {
            n: i,
            method: req.method ?? "",
            path: req.url ?? "",
            status: up.statusCode,
            headers: plain(up.headers),
            body: Buffer.from(await up.body.arrayBuffer()),
          };
          answers.push(got);
          const out = tamper(got);
          res.writeHead(out.status, out.headers);
          res.end(out.body);
        } catch {
          res.destroy();
        }
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    answers,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** `a` with the NDJSON record whose JSON matches `which` rewritten by `edit` (its tag kept as sent). */
export function editRecord(a: Answer, which: RegExp, edit: (json: string) => string): Answer {
  const lines = a.body.toString("utf8").split("\n");
  const out = lines.map((line) => {
    const tag = /^[0-9a-f]+ /.exec(line)?.[0] ?? ""; // shared-secret mode: the record's tag
    const json = line.slice(tag.length);
    return which.test(json) ? `${tag}${edit(json)}` : line;
  });
  return { ...a, body: Buffer.from(out.join("\n")) };
}

/**
 * An on-path attacker for upgrades: a TCP relay on 127.0.0.1 that passes every byte to `target` and
 * back, but hands the head of each connection's first answer (status line and headers, as text) to
 * `tamper` before passing what it returns. `heads` are the heads as the target sent them.
 */
export async function onPathUpgradeRelay(
  target: string,
  tamper: (head: string) => string = (h) => h,
): Promise<{ url: string; heads: string[]; close(): Promise<void> }> {
  const { hostname, port: targetPort } = new URL(target);
  const heads: string[] = [];
  const sockets = new Set<Socket>();
  const server = createTcpServer((down) => {
    const up = connect(Number(targetPort), hostname);
    for (const s of [down, up]) {
      sockets.add(s);
      s.on("error", () => {});
      s.on("close", () => {
        sockets.delete(s);
        down.destroy();
        up.destroy();
      });
    }
    down.pipe(up);
    let pending = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      const end = pending.indexOf("\r\n\r\n");
      if (end < 0) return;
      up.off("data", onData);
      const head = pending.subarray(0, end).toString("latin1");
      heads.push(head);
      down.write(Buffer.concat([Buffer.from(tamper(head), "latin1"), pending.subarray(end)]));
      up.pipe(down);
    };
    up.on("data", onData);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    heads,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
