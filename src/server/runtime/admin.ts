/**
 * Calls from outside the protocol: the admin endpoints (policy switch, cache reset), the membership
 * changes peer discovery makes (add, move, remove, refuse, readmit), and the hello this node answers.
 * It owns the membership's addresses and the peers refused until a re-check passes; whatever the node returns
 * to be done (effects) goes back to the interpreter.
 */

import type { Engine } from "../../core/engine.js";
import type { PrefixNode } from "../../core/node/node.js";
import type { Effect } from "../../core/node/types.js";
import { acceptedRange, type ProtocolRange } from "../../net/protocol-range.js";
import type { PeerClient } from "../../net/transport-client.js";
import type { PeerHello } from "../../net/wire-schemas.js";
import { ServiceError } from "../service.js";
import type { RuntimeLogger } from "./logger.js";

/** What a verified hello tells about a peer (tests pass only part of it). */
export type HelloNews = Partial<
  Pick<PeerHello, "promptText" | "model" | "models" | "capacityTokens" | "channelAcceptMac">
>;

export interface AdminOptions {
  node: PrefixNode;
  engine: Engine;
  client: PeerClient;
  logger: RuntimeLogger;
  clusterId: string;
  /** Peer id → peer URL: the static members, then those admitted at run time. */
  peerUrls: Map<string, string>;
  /** LoRA adapters this node serves besides its engine's model (advertised in the hello). */
  adapters?: readonly string[] | undefined;
  /** Policy names the node accepts (for the admin switch). */
  policies?: readonly string[] | undefined;
}

export class Admin {
  /** Peers whose hello showed another cluster/model/id: never talked to. */
  private readonly refused = new Map<string, string>();
  /** Each verified member's base model (its hello's `model`). */
  private readonly baseModels = new Map<string, string>();

  /** The protocol versions this node speaks in its security mode (protocol-range.ts). */
  readonly protocols: ProtocolRange;

  constructor(private readonly o: AdminOptions) {
    this.protocols = acceptedRange(o.client.authMode);
  }

  /** What this node answers on `GET /peer/hello`. */
  hello(): PeerHello {
    return {
      id: this.o.node.id,
      cluster: this.o.clusterId,
      model: this.o.engine.info.model,
      protocol: this.protocols.max,
      minProtocol: this.protocols.min,
      gossip: this.o.node.config.gossip,
      promptText: this.o.engine.info.needsPromptText,
      // Said only where it is true: mTLS needs no such MAC (TLS proves who answered the upgrade).
      ...(this.o.client.authMode === "hmac" ? { channelAcceptMac: true as const } : {}),
      models: [this.o.engine.info.model, ...(this.o.adapters ?? [])],
      capacityTokens: this.o.node.localTree().capacity,
      ...incarnationOf(this.o.node),
    };
  }

  /** A member's base model, as its hello said (its other advertised models are its adapters). */
  peerBaseModel(id: string): string | undefined {
    return this.baseModels.get(id);
  }

  /** A member we have not refused: the only senders the peer server lets through. */
  isKnownPeer(id: string): boolean {
    return this.o.peerUrls.has(id) && !this.refused.has(id);
  }

  /** Why nothing may be sent to `id`, if it was refused (transport-rules.ts, [Refused peers]). */
  refusal(id: string): string | undefined {
    return this.refused.get(id);
  }

  /** Stops all traffic with a peer that proved to be from another cluster or model. */
  refusePeer(id: string, reason: string): void {
    this.refused.set(id, reason);
  }

  /** A refused peer passed a fresh hello check: traffic flows again. False if it was not refused. */
  readmitPeer(id: string): boolean {
    return this.refused.delete(id);
  }

  /** True if `id` is a member now (static or admitted at run time). */
  hasPeer(id: string): boolean {
    return this.o.peerUrls.has(id);
  }

  peerUrl(id: string): string | undefined {
    return this.o.peerUrls.get(id);
  }

  /**
   * Admits a peer found at run time (its hello already checked): a transport pool pinned to its id,
   * then the node's `addPeer`. False if the node refuses it (membership full, already a member).
   */
  addPeer(id: string, url: string, hello: HelloNews): boolean {
    if (this.o.peerUrls.has(id) || !this.o.node.addPeer(id)) return false;
    this.o.client.setPeer(id, url);
    this.o.peerUrls.set(id, url);
    this.notePeerHello(id, hello);
    this.o.logger.info({ peer: id, url }, "peer added");
    return true;
  }

  /**
   * What a peer's (checked) hello tells the transport: whether its engine needs the prompt text (until
   * a hello says otherwise, forwards carry it: a peer that takes text cannot run without it), and
   * whether its channel's 101 answer carries a MAC. And the node: the cache it advertised caps our
   * estimate of it.
   */
  notePeerHello(id: string, hello: HelloNews): void {
    this.o.client.setPromptText(id, hello.promptText !== false);
    // A build before the channel MAC says nothing: its 101 is taken unproven, as it always was. Only
    // a whole hello (every one names its model) tells that; no hello at all leaves the MAC required.
    if (hello.model !== undefined) this.o.client.setChannelAcceptMac(id, hello.channelAcceptMac === true);
    if (hello.capacityTokens !== undefined) this.o.node.capPeerEstimate(id, hello.capacityTokens);
    // What it serves (mixed meshes): its models, or its one model when its hello lists none.
    if (hello.model !== undefined) {
      this.baseModels.set(id, hello.model);
      this.o.node.peerModels.set(id, hello.models ?? [hello.model]);
    }
  }

  /**
   * gossip "scuttlebutt": a member SWIM admitted after mesh-peers.ts verified it: reachable at `url`,
   * its pool pinned to its id, what its hello said noted.
   */
  meshJoined(id: string, url: string, hello: HelloNews, afterReset = false): void {
    this.o.client.setPeer(id, url);
    this.o.peerUrls.set(id, url);
    this.notePeerHello(id, hello);
    // Back after our own cache reset (mesh-peers.ts newEpoch): that reset's one line says it.
    if (afterReset) this.o.logger.debug({ peer: id, url }, "member rejoined after the cache reset");
    else this.o.logger.info({ peer: id, url }, "member joined the mesh");
  }

  /**
   * gossip "scuttlebutt": a member SWIM dropped (dead or left): its URL goes, and its pool closes
   * unless `keepPool` (it left draining: mesh-peers.ts keeps the pool for its final cancels).
   */
  meshLeft(id: string, keepPool = false): void {
    this.o.peerUrls.delete(id);
    this.baseModels.delete(id);
    this.o.node.peerModels.delete(id);
    if (!keepPool) this.o.client.removePeer(id);
  }

  /** Points a member at another address (its old one vanished, another still announces its id). */
  movePeer(id: string, url: string): void {
    if (!this.o.peerUrls.has(id)) return;
    this.o.client.setPeer(id, url);
    this.o.peerUrls.set(id, url);
    this.o.logger.info({ peer: id, url }, "peer moved");
  }

  /**
   * Removes a member (gone from DNS, or its address now answers with another id): the node drops its
   * estimate and fails pending forwards over at once — the effects returned, for the interpreter to
   * apply before `closePeer`. Undefined if `id` is not a member.
   */
  removePeer(id: string): Effect[] | undefined {
    if (!this.o.peerUrls.has(id)) return undefined;
    this.o.peerUrls.delete(id);
    this.baseModels.delete(id);
    return this.o.node.removePeer(id);
  }

  /** Closes a removed member's pool and channel. */
  closePeer(id: string, why: string): void {
    this.o.client.removePeer(id);
    this.o.logger.info({ peer: id, why }, "peer removed");
  }

  setPolicy(name: string): void {
    if (this.o.policies && !this.o.policies.includes(name)) {
      throw new ServiceError(
        400,
        "invalid_request_error",
        `unknown policy '${name}' (one of ${this.o.policies.join(", ")})`,
      );
    }
    this.o.node.setPolicy(name as Parameters<PrefixNode["setPolicy"]>[0]);
    this.o.logger.info({ policy: name }, "routing policy switched");
  }

  /**
   * The engine's half of a cache reset (the node's restart is the interpreter's): only when idle, and
   * only for an engine whose cache can be emptied.
   */
  async dropEngineCache(busy: boolean): Promise<void> {
    if (busy) throw new ServiceError(409, "invalid_request_error", "node is busy; reset only between runs");
    const { engine, node } = this.o;
    if (engine.info.cacheMode === "node-managed") {
      // The tree is about to be replaced; free exactly what it holds in the engine first.
      const tree = node.localTree();
      const runs = tree.evict(tree.size);
      if (runs.length > 0) engine.evict?.(runs);
    } else {
      const reset = engine.resetCache;
      if (!reset)
        throw new ServiceError(501, "server_error", `engine ${engine.info.kind} cannot drop its cache`);
      await reset.call(engine);
    }
  }
}

/** Our SWIM incarnation for the hello (none on the full mesh, which runs no SWIM). */
function incarnationOf(node: PrefixNode): { incarnation?: number } {
  const incarnation = node.meshIncarnation();
  return incarnation === undefined ? {} : { incarnation };
}
