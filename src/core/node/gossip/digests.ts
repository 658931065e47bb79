/**
 * Scuttlebutt's digests (scuttlebutt.ts): the (owner, epoch, version) entries a node lists — itself
 * first, then each owner held at the version a staged apply will hold — whole, or for a round with push
 * to holders a random sample of the owners held. Building only: what to ask for is wants.ts's.
 */
import type { Estimates } from "../../estimates.js";
import { isNewer } from "../../snapshot.js";
import type { DigestEntry, ScuttlebuttConfig, ScuttlebuttDeps } from "./config.js";
import { type OwnerLog, type OwnState, pickRandom } from "./states.js";

/** A member's id (node/types.ts's NodeId). */
type NodeId = string;

/** Held owners a round's digest lists with push to holders (besides ourselves), by default. */
const DIGEST_SAMPLE = 16;

/** What we hold of `owner`, or will once its staged apply is in. */
export function holding(
  estimates: Estimates,
  owner: NodeId,
  log: OwnerLog,
): { epoch: number; version: number } | undefined {
  const held = estimates.heldNow(owner);
  const d = log.deferred?.snapshot.header;
  if (d === undefined || (held !== undefined && !isNewer(d, held))) return held;
  return { epoch: d.epoch, version: d.version };
}

export class Digests {
  /** Scratch for a round's sampled digest: the owners held (reused: one round at a time). */
  private readonly sampleFrom: NodeId[] = [];
  /** Whether the last round digest listed a sample of the owners held (`round`). */
  private lastSampled = false;

  constructor(
    private readonly selfId: NodeId,
    private readonly logs: ReadonlyMap<NodeId, OwnerLog>,
    private readonly estimates: Estimates,
    private readonly deps: ScuttlebuttDeps,
    private readonly config: ScuttlebuttConfig,
  ) {}

  /** Whether the last round digest listed a sample of the owners held (its message says room 0). */
  get sampled(): boolean {
    return this.lastSampled;
  }

  /** Our digest: ourselves first, then every owner held (at the version a staged apply will hold). */
  whole(self: OwnState): DigestEntry[] {
    const out: DigestEntry[] = [this.selfEntry(self)];
    for (const [owner, log] of this.logs) {
      const e = this.entryOf(owner, log);
      if (e !== undefined) out.push(e);
    }
    return out;
  }

  /** Our own digest entry: our tree's (epoch, version). */
  selfEntry(self: OwnState): DigestEntry {
    const h = self.header();
    return { owner: this.selfId, epoch: h.epoch, version: h.version };
  }

  /**
   * A held owner's digest entry, at what we hold or will once its staged apply is in; version 0 while
   * our estimate holds a wrong guess (asks for the whole set). Undefined: nothing of it held yet.
   */
  entryOf(owner: NodeId, log: OwnerLog): DigestEntry | undefined {
    const held = holding(this.estimates, owner, log);
    if (held === undefined) return undefined;
    return { owner, epoch: held.epoch, version: log.wantFull ? 0 : held.version };
  }

  /**
   * The digest a round sends: the whole one, or with push to holders (`sample`: where owners keep their
   * holders up to date themselves) ourselves and `digestSample` held owners at random — enough for
   * partners to find owners to take or discover, at a size that does not grow with the owners held.
   */
  round(self: OwnState, sample: boolean): DigestEntry[] {
    const k = this.config.digestSample ?? DIGEST_SAMPLE;
    this.lastSampled = false;
    if (!sample) return this.whole(self);
    // The sample is drawn over the owners the whole digest would list, in its order, and only the
    // picked get an entry: the same draws and entries as sampling the whole digest, without it.
    const owners = this.sampleFrom;
    owners.length = 0;
    for (const [owner, log] of this.logs)
      if (holding(this.estimates, owner, log) !== undefined) owners.push(owner);
    if (owners.length <= k) return this.whole(self);
    this.lastSampled = true;
    const out: DigestEntry[] = [this.selfEntry(self)];
    for (const owner of pickRandom(owners, k, this.deps.random))
      out.push(this.entryOf(owner, this.logs.get(owner) as OwnerLog) as DigestEntry);
    return out;
  }
}
