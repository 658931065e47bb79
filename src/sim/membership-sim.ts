/**
 * The membership simulator: N unchanged `Swim` state machines (src/core/node/swim) on the simulated
 * network (network.ts: delay, jitter, loss, partitions), with crashes, freezes (pauses), leaves, late
 * joiners, impostors, skewed clocks and forged news, in virtual time from one seed. It answers
 * `verify-member` as the daemon would (hello-tries.ts: yes for a running member after one round trip,
 * no for an impostor, no for a member down, crashed, left, not started or cut off by a partition, after
 * the daemon's retries; one check at a time per id a node checks), counts every message and its exact
 * encoded bytes, and records each node's status changes so tests and the scale experiment can time
 * detection and spot false suspicions.
 */
import { swimSize } from "../core/node/swim/codec.js";
import type { SwimConfigInput } from "../core/node/swim/config.js";
import { Swim } from "../core/node/swim/swim.js";
import {
  type MemberStatus,
  type MemberUpdate,
  type SwimEffect,
  type SwimInput,
  type SwimMessage,
  swimTimerKey,
} from "../core/node/swim/types.js";
import { Prng } from "../core/prng.js";
import { EventQueue, type SimEvent } from "./event-queue.js";
import { helloTry } from "./hello-tries.js";
import { SimNetwork } from "./network.js";
import type { NetworkFaults, SimPause } from "./types.js";

export interface MembershipSimConfig {
  /** Cluster members "n0" … "n{N-1}". */
  nodes: number;
  seed: number;
  commMs: number;
  jitterMs: number;
  durationMs: number;
  swim?: SwimConfigInput;
  /** Node indexes every node names as its seeds (default [0]). */
  seeds?: number[];
  /** Per-node start time (a late joiner); default 0 for all. */
  startAtMs?: Record<number, number>;
  /** Extra participants "imp0" … that run the protocol but hold no credential (refused). */
  impostors?: number;
  network?: NetworkFaults;
  crashes?: { node: number; atMs: number }[];
  pauses?: SimPause[];
  leaves?: { node: number; atMs: number }[];
  /** Messages sent before this time are not counted (formation left out of a steady-state rate). */
  countFromMs?: number;
  /** A round trip of a `verify-member` check's hello fetch (default: one network round trip). */
  verifyMs?: number;
  /** Also count every member's bytes per window of this many ms (`bytesPerWindow`, from time 0). */
  windowMs?: number;
  /** Per-node clock offset (ms added to the virtual time its Swim reads): clock skew; default 0. */
  clockOffsetMs?: Record<number, number>;
  /**
   * A member holding the credential gossips `update` (forged news of anyone) to every other cluster
   * member at `atMs`, as one gossip message each.
   */
  forgeries?: { node: number; atMs: number; update: MemberUpdate }[];
  /**
   * Members run twice: a second process with the same id (a copied config), started at `atMs` with
   * its clock `clockOffsetMs` on; what the odd-numbered nodes send to that id reaches it instead once
   * it runs (before, only the member answers to the id), and all of it once the member has crashed
   * (a restart).
   */
  twins?: { node: number; atMs: number; clockOffsetMs?: number }[];
}

/** One status change node `observer` made about `id`. */
export interface StatusChange {
  at: number;
  observer: string;
  id: string;
  to: MemberStatus;
}

export interface MembershipSimResult {
  ids: string[];
  /** Each cluster member's Swim at the end (null: crashed or left). */
  members: (Swim | null)[];
  impostors: Swim[];
  /** The twins' processes (`twins`' order; null: crashed). */
  twins: (Swim | null)[];
  trace: StatusChange[];
  /** Messages and bytes sent by cluster members, by message type. */
  messages: Record<string, { count: number; bytes: number }>;
  /** Messages sent per cluster member (index). */
  sentPerNode: number[];
  bytesPerNode: number[];
  /** Bytes all members sent in each `windowMs` window from time 0 (empty without `windowMs`). */
  bytesPerWindow: number[];
  /** `verify-member` checks cluster members asked for (from `countFromMs`): hello fetches, in a daemon. */
  verifyChecks: number;
  virtualMs: number;
}

type Ev = SimEvent &
  (
    | { k: "deliver"; to: number; from: number; msg: SwimMessage }
    | { k: "timer"; node: number; key: string; token: number; input: SwimInput }
    | { k: "verified"; node: number; input: SwimInput }
    | { k: "verify"; node: number; id: string; attempt: number }
    | { k: "start"; node: number }
    | { k: "crash"; node: number }
    | { k: "leave"; node: number }
    | { k: "forge"; node: number; update: MemberUpdate }
  );

export function runMembership(c: MembershipSimConfig): MembershipSimResult {
  if (!Number.isInteger(c.nodes) || c.nodes < 1 || c.nodes > 4096) throw new Error(`nodes must be 1-4096`);
  const rng = new Prng(c.seed);
  const net = new SimNetwork(rng.fork(), c.commMs, c.jitterMs, c.network ?? {});
  const N = c.nodes;
  const I = c.impostors ?? 0;
  const ids = [
    ...Array.from({ length: N }, (_, i) => `n${i}`),
    ...Array.from({ length: I }, (_, i) => `imp${i}`),
  ];
  const idx = new Map(ids.map((id, i) => [id, i]));
  // A twin's process is participant ids.length + k, under its member's id (idx keeps the member's).
  const twinOf = new Map<number, number>();
  for (const t of c.twins ?? []) {
    twinOf.set(t.node, ids.length);
    ids.push(ids[t.node] as string);
  }
  const seedIds = (c.seeds ?? [0]).map((i) => ids[i] as string);
  const queue = new EventQueue<Ev>();
  const trace: StatusChange[] = [];
  const messages: Record<string, { count: number; bytes: number }> = {};
  const sentPerNode = new Array<number>(N).fill(0);
  const bytesPerNode = new Array<number>(N).fill(0);
  const bytesPerWindow: number[] = [];
  const timers = ids.map(() => new Map<string, number>());
  const down = new Array<boolean>(ids.length).fill(false);
  const started = new Array<boolean>(ids.length).fill(false);
  const pausedUntil = (node: number, at: number): number | undefined => {
    for (const p of c.pauses ?? []) if (p.node === node && at >= p.atMs && at < p.untilMs) return p.untilMs;
    return undefined;
  };
  const verifyMs = c.verifyMs ?? 2 * c.commMs;
  let now = 0;
  let token = 0;
  let verifyChecks = 0;
  const delays = [0, 0];

  const swims: (Swim | null)[] = ids.map((id, i) => {
    const r = rng.fork();
    const offset = i < N + I ? (c.clockOffsetMs?.[i] ?? 0) : (c.twins?.[i - N - I]?.clockOffsetMs ?? 0);
    const s = new Swim(
      id,
      seedIds,
      {
        now: () => now + offset,
        random: () => r.next(),
        observe: (about, _from, to) => {
          if (i < N) trace.push({ at: now, observer: id, id: about, to });
        },
      },
      c.swim,
    );
    return s;
  });

  /** The process a message from `node` to `member` reaches: its twin's, for some, once it runs (`twins`). */
  const route = (node: number, member: number): number => {
    const twin = twinOf.get(member);
    if (twin === undefined) return member;
    return down[member] || (node % 2 === 1 && started[twin]) ? twin : member;
  };

  /** Checks under way, as `node id`: like the daemon (mesh-verify.ts), one per id a node checks. */
  const checking = new Set<string>();

  /**
   * Try `attempt` of `node`'s check of `id`: its process answers if it runs (or resumes in time) and
   * no partition separates them.
   */
  const tryHello = (node: number, id: string, attempt: number): void => {
    const member = idx.get(id) ?? N;
    if (member >= N) {
      // An impostor (or a stranger): it answers, without the cluster's credential: refused.
      queue.push({ at: now + verifyMs, k: "verified", node, input: { type: "verified", id, ok: false } });
      return;
    }
    const p = route(node, member);
    const answersAt = started[p] && !down[p] ? (pausedUntil(p, now) ?? now) : undefined;
    const r = helloTry(now, attempt, answersAt, verifyMs, net.partitioned(now, node, p));
    if (r.k === "retry") return void queue.push({ at: r.at, k: "verify", node, id, attempt: attempt + 1 });
    queue.push({ at: r.at, k: "verified", node, input: { type: "verified", id, ok: r.k === "answer" } });
  };

  const apply = (node: number, effects: SwimEffect[]): void => {
    for (const e of effects) {
      switch (e.type) {
        case "send": {
          const member = idx.get(e.to);
          const to = member === undefined ? undefined : route(node, member);
          if (node < N && c.windowMs !== undefined) {
            const w = Math.floor(now / c.windowMs);
            while (bytesPerWindow.length <= w) bytesPerWindow.push(0);
            bytesPerWindow[w] = (bytesPerWindow[w] as number) + swimSize(e.msg);
          }
          if (node < N && now >= (c.countFromMs ?? 0)) {
            const b = swimSize(e.msg);
            let t = messages[e.msg.type];
            if (t === undefined) {
              t = { count: 0, bytes: 0 };
              messages[e.msg.type] = t;
            }
            t.count++;
            t.bytes += b;
            sentPerNode[node] = (sentPerNode[node] as number) + 1;
            bytesPerNode[node] = (bytesPerNode[node] as number) + b;
          }
          if (to === undefined) break;
          const n = net.delays(now, node, to, delays);
          for (let i = 0; i < n; i++)
            queue.push({ at: now + (delays[i] as number), k: "deliver", to, from: node, msg: e.msg });
          break;
        }
        case "set-timer": {
          const key = swimTimerKey(e.timer);
          const t = ++token;
          (timers[node] as Map<string, number>).set(key, t);
          queue.push({
            at: now + e.delayMs,
            k: "timer",
            node,
            key,
            token: t,
            input: { type: "timer", timer: e.timer },
          });
          break;
        }
        case "verify-member": {
          if (checking.has(`${node} ${e.id}`)) break;
          checking.add(`${node} ${e.id}`);
          if (node < N && now >= (c.countFromMs ?? 0)) verifyChecks++;
          tryHello(node, e.id, 0);
          break;
        }
        case "member-up":
        case "member-down":
          break;
      }
    }
  };

  for (let i = 0; i < N + I; i++) queue.push({ at: c.startAtMs?.[i] ?? 0, k: "start", node: i });
  for (const [k, t] of (c.twins ?? []).entries()) queue.push({ at: t.atMs, k: "start", node: N + I + k });
  for (const x of c.crashes ?? []) queue.push({ at: x.atMs, k: "crash", node: x.node });
  for (const x of c.leaves ?? []) queue.push({ at: x.atMs, k: "leave", node: x.node });
  for (const x of c.forgeries ?? []) queue.push({ at: x.atMs, k: "forge", node: x.node, update: x.update });

  for (let ev = queue.pop(); ev !== undefined && ev.at <= c.durationMs; ev = queue.pop()) {
    now = ev.at;
    const node = ev.k === "deliver" ? ev.to : ev.node;
    if (down[node]) continue;
    const until = pausedUntil(node, now);
    if (until !== undefined && ev.k !== "crash") {
      // A frozen process handles nothing; everything waits for it to resume (in order).
      queue.push({ ...ev, at: until });
      continue;
    }
    const s = swims[node] as Swim;
    switch (ev.k) {
      case "start":
        started[node] = true;
        apply(node, s.start());
        break;
      case "deliver":
        if (!started[node]) break;
        apply(node, s.handle({ type: "message", from: ids[ev.from] as string, msg: ev.msg }));
        break;
      case "timer":
        if ((timers[node] as Map<string, number>).get(ev.key) !== ev.token) break;
        (timers[node] as Map<string, number>).delete(ev.key);
        apply(node, s.handle(ev.input));
        break;
      case "verified":
        if (ev.input.type === "verified") checking.delete(`${node} ${ev.input.id}`);
        apply(node, s.handle(ev.input));
        break;
      case "verify":
        tryHello(node, ev.id, ev.attempt);
        break;
      case "crash":
        down[node] = true;
        swims[node] = null;
        break;
      case "leave":
        apply(node, s.leave());
        down[node] = true;
        swims[node] = null;
        break;
      case "forge":
        for (let to = 0; to < N; to++)
          if (to !== node)
            apply(node, [
              { type: "send", to: ids[to] as string, msg: { type: "gossip", updates: [ev.update] } },
            ]);
        break;
    }
  }
  return {
    ids,
    members: swims.slice(0, N),
    impostors: swims.slice(N, N + I).filter((s): s is Swim => s !== null),
    twins: swims.slice(N + I),
    trace,
    messages,
    sentPerNode,
    bytesPerNode,
    bytesPerWindow,
    verifyChecks,
    virtualMs: now,
  };
}
