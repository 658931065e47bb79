/**
 * One session on a node's forward channel (a WebSocket on the peer port) for the boundary fuzz:
 * sends frames as member B and checks the channel's answer to each against the frame decoder's
 * verdict: a forward gets its final record, a refusable one its `rej`, a cancel nothing, and a frame
 * that is no forward frame at all closes the channel with 1008. Nothing else, and all of it in time.
 */
import WebSocket from "ws";
import { decodeForwardFrame } from "../../src/net/forward-frame.js";
import { channelFrameSchema } from "../../src/net/wire-schemas.js";

/** Forwards already sent (reqId/attempt), in every session: a re-sent one would be a duplicate. */
const sent = new Set<string>();

/** Opens a channel as B, retrying while the node still counts the last session's (429). */
async function openChannel(peerUrl: string, deadline: number): Promise<WebSocket> {
  for (;;) {
    const ws = new WebSocket(`${peerUrl.replace(/^http/, "ws")}/peer/channel`, {
      headers: { "x-prefixmesh-sender": "B" },
      perMessageDeflate: false,
    });
    const status = await new Promise<number>((resolve) => {
      ws.once("open", () => resolve(101));
      ws.once("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
      ws.once("error", () => resolve(0));
    });
    if (status === 101) return ws;
    ws.terminate();
    if (status !== 429 || Date.now() > deadline) throw new Error(`channel upgrade refused: ${status}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Sends `frames` on a fresh channel; rejects with what the channel did wrong. */
export async function channelSession(
  peerUrl: string,
  frames: readonly Buffer[],
  deadlineMs: number,
  /** Most bytes the channel may answer with (every size a caller controls is bounded). */
  maxAnswerBytes: number,
): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  const ws = await openChannel(peerUrl, deadline);
  const owed = new Map<number, "msg" | "rej">();
  let closeOwed = false;
  const problems: string[] = [];
  let closed: number | undefined;
  let answerBytes = 0;
  ws.on("message", (data: Buffer) => {
    answerBytes += data.length;
    const parsed = channelFrameSchema.safeParse(JSON.parse(data.toString("utf8")));
    if (!parsed.success) {
      problems.push(`malformed answer frame: ${data.toString("utf8", 0, 200)}`);
      return;
    }
    for (const rec of parsed.data) {
      if (rec.t !== "msg" && rec.t !== "rej") continue;
      const want = owed.get(rec.k);
      if (want !== rec.t) problems.push(`stream ${rec.k}: got ${rec.t}, owed ${want ?? "nothing"}`);
      owed.delete(rec.k);
    }
  });
  const closing = new Promise<void>((resolve) =>
    ws.once("close", (code: number) => {
      closed = code;
      resolve();
    }),
  );
  for (const f of frames) {
    const d = decodeForwardFrame(f);
    if (d.ok && d.msg !== undefined) {
      const id = `${d.msg.reqId}/${d.msg.attempt}`;
      if (sent.has(id) || owed.has(d.k)) continue;
      sent.add(id);
      owed.set(d.k, "msg");
    } else if (!d.ok && d.k !== undefined) {
      if (owed.has(d.k)) continue;
      owed.set(d.k, "rej");
    } else if (!d.ok) closeOwed = true;
    ws.send(f, { binary: true });
    if (closeOwed) break;
  }
  // Until every owed record came and, if owed, the close; or the deadline.
  while (Date.now() < deadline && problems.length === 0) {
    // A closed channel says nothing more (streams open on it are cut off, which origins treat as errors).
    if (closed !== undefined || (owed.size === 0 && !closeOwed)) break;
    await new Promise((r) => setTimeout(r, 5));
  }
  if (closed === undefined) {
    ws.close();
    await closing;
  }
  if (closeOwed && closed !== 1008)
    problems.push(`a bad frame should close the channel with 1008, got ${closed}`);
  else if (!closeOwed && closed !== 1005 && closed !== 1000)
    problems.push(`the channel closed by itself: ${closed}`);
  if (owed.size > 0 && !closeOwed) problems.push(`no answer on streams ${[...owed].join(", ")}`);
  if (answerBytes > maxAnswerBytes) problems.push(`answered with ${answerBytes} bytes`);
  if (problems.length > 0) throw new Error(problems.join("; "));
}
