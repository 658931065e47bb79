/**
 * A deterministic driver for many real Swim instances (swim-forged-storm, swim-crash-loop tests): one
 * clock, messages delivered after 1–5 ms, timers held under their key (set again: replaced, as the
 * runtime's are), and every `verify-member` answered yes after 200–250 ms with what the member's hello
 * says at answer time (`saidIncarnation`). Counts the checks asked of each member. A member restarts
 * as a new process at the same address (`restart`), its clock perhaps stepped off the driver's.
 */
import type { SwimConfigInput } from "../../src/core/node/swim/config.js";
import { Swim } from "../../src/core/node/swim/swim.js";
import { type SwimEffect, type SwimInput, swimTimerKey } from "../../src/core/node/swim/types.js";

/** mulberry32: a small seeded PRNG, so runs are reproducible. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

interface Event {
  at: number;
  seq: number;
  run: () => void;
}

export class StormDriver {
  now = 0;
  readonly swims = new Map<string, Swim>();
  /** Checks asked of each member (verify-member effects naming it), by any node. */
  readonly checks = new Map<string, number>();
  private readonly queue: Event[] = [];
  private seq = 0;
  private readonly timers = new Map<string, number>();
  private readonly rand: () => number;
  /** Each member's process count (its timers and checks end with it) and clock offset (ms). */
  private readonly lives = new Map<string, number>();
  private readonly offsets = new Map<string, number>();
  /** What a check of a member reads (its hello's incarnation); default, what its hello says now. */
  hello: (id: string) => number | undefined = (id) => this.swims.get(id)?.saidIncarnation;

  constructor(
    n: number,
    private readonly config: SwimConfigInput,
    private readonly seed = 1,
  ) {
    this.rand = seededRandom(seed);
    for (let i = 0; i < n; i++) this.swims.set(`n${i}`, this.process(`n${i}`));
    for (const [id, swim] of this.swims) this.effects(id, swim.start());
  }

  /** `id` crashes and a new process starts at its address, its clock `offsetMs` off the driver's. */
  restart(id: string, offsetMs = 0): void {
    this.lives.set(id, (this.lives.get(id) ?? 0) + 1);
    this.offsets.set(id, offsetMs);
    const swim = this.process(id);
    this.swims.set(id, swim);
    this.effects(id, swim.start());
  }

  /** `input` handled by `id` now, its effects carried out. */
  handle(id: string, input: SwimInput): void {
    const swim = this.swims.get(id);
    if (swim !== undefined) this.effects(id, swim.handle(input));
  }

  /** Runs every event due up to `until` (ms). */
  runUntil(until: number): void {
    while (this.queue.length > 0 && (this.queue[0] as Event).at <= until) {
      const e = this.queue.shift() as Event;
      this.now = e.at;
      e.run();
    }
    this.now = until;
  }

  checksOf(id: string): number {
    return this.checks.get(id) ?? 0;
  }

  private process(id: string): Swim {
    const i = Number(id.slice(1));
    const random = seededRandom(this.seed * 1_000 + i + 100_000 * (this.lives.get(id) ?? 0));
    const now = () => this.now + (this.offsets.get(id) ?? 0);
    return new Swim(id, i === 0 ? [] : ["n0"], { now, random }, this.config);
  }

  private effects(id: string, effects: SwimEffect[]): void {
    const life = this.lives.get(id);
    // A process's timers and the checks it asked for end with it; messages reach whoever is there.
    const alive = () => this.lives.get(id) === life;
    for (const e of effects) {
      if (e.type === "send") {
        const { to, msg } = e;
        this.after(1 + this.rand() * 4, () => this.handle(to, { type: "message", from: id, msg }));
      } else if (e.type === "set-timer") {
        const key = `${id}/${swimTimerKey(e.timer)}`;
        const gen = (this.timers.get(key) ?? 0) + 1;
        this.timers.set(key, gen);
        const timer = e.timer;
        this.after(e.delayMs, () => {
          if (this.timers.get(key) === gen && alive()) this.handle(id, { type: "timer", timer });
        });
      } else if (e.type === "verify-member") {
        const who = e.id;
        this.checks.set(who, this.checksOf(who) + 1);
        this.after(200 + this.rand() * 50, () => {
          if (!alive()) return;
          const incarnation = this.hello(who);
          // A member's process answers (yes), with its hello's word if it says one yet.
          this.handle(id, { type: "verified", id: who, ok: this.swims.has(who), incarnation });
        });
      }
    }
  }

  private after(delayMs: number, run: () => void): void {
    const e = { at: this.now + delayMs, seq: this.seq++, run };
    // Sorted by time, then by when scheduled: the pending set stays small, a linear insert will do.
    let i = this.queue.length;
    while (i > 0 && (this.queue[i - 1] as Event).at > e.at) i--;
    this.queue.splice(i, 0, e);
  }
}
