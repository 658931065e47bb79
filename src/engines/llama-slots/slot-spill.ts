/**
 * The slot cache's use of saved slot states (saved-slots.ts): before a run, saving a slot's contents
 * to the server's `--slot-save-path` when the run would lose them, and restoring the state that gives
 * the prompt more cached tokens (the embedded engine's spill and restore, on the server's disk). A
 * save the server refuses turns saving off, with the reason kept for the status.
 */
import type { Tokens } from "../../core/engine.js";
import { type NamespaceFields, namespaceOf } from "../../core/namespace.js";
import { EngineInputError, EngineUnavailableError } from "../errors.js";
import type { HttpClient } from "../http-client.js";
import type { SavedSlots } from "./saved-slots.js";
import type { SlotMirror } from "./slot-mirror.js";
import { knownPrefix, lcp } from "./tokens.js";

export class SlotSpill {
  /** undefined: off, or the server refused. */
  private saved: SavedSlots | undefined;
  private off: string | undefined;
  private saves = 0;
  private restores = 0;

  constructor(
    private readonly http: HttpClient,
    saved: SavedSlots | undefined,
  ) {
    this.saved = saved;
  }

  /** Whether states are saved (on, and not refused by the server). */
  get enabled(): boolean {
    return this.saved !== undefined;
  }

  /** The slot states saved on the server's disk. */
  sequences(): Tokens[] {
    return this.saved?.sequences() ?? [];
  }

  status(): { enabled: boolean; off: string | undefined; states: number; saves: number; restores: number } {
    return {
      enabled: this.saved !== undefined,
      off: this.off,
      states: this.saved?.entries.length ?? 0,
      saves: this.saves,
      restores: this.restores,
    };
  }

  /**
   * Before a run on `slot` (`idle`: it and the free slots): restores the saved state that gives
   * `prompt` more cached tokens than the server would find, and first saves the slot's contents when
   * the run would lose most of them and no saved state holds them. `mirror` is the one the node
   * follows now; `each` changes every mirror alike.
   */
  async before(
    slot: number,
    prompt: Tokens,
    ns: NamespaceFields,
    idle: number[],
    mirror: SlotMirror,
    each: (fn: (m: SlotMirror) => void) => void,
  ): Promise<void> {
    const saved = this.saved!;
    const current = mirror.slotTokens(slot);
    const currentNs = mirror.slotNamespace(slot);
    const without = mirror.predict(slot, prompt, idle, undefined, ns);
    const best = saved.best(prompt, ns);
    const restore =
      best && mirror.predict(slot, prompt, idle, best.state.tokens, ns) > without ? best.state : undefined;
    if (restore) saved.touch(restore);
    const ownNs = namespaceOf(currentNs) === namespaceOf(ns);
    const loses = restore !== undefined || !ownNs || 2 * lcp(current, prompt) < current.length;
    if (loses && knownPrefix(current).length > 0 && !saved.covers(current, currentNs)) {
      const file = saved.nextFile();
      if (file !== restore?.filename && (await this.slotAction(slot, "save", file))) {
        saved.saved(file, current, currentNs);
        this.saves++;
      }
    }
    if (!restore || !this.saved) return;
    if (await this.slotAction(slot, "restore", restore.filename)) {
      each((m) => m.restore(slot, restore.tokens, restore.ns));
      this.restores++;
    } else {
      // A failed restore leaves the slot empty (the server clears it).
      each((m) => m.restore(slot, new Uint32Array(0)));
      saved.drop(restore);
    }
  }

  /** `POST /slots/{id}?action=…`; false when the server refused (a refused save turns saving off). */
  private async slotAction(slot: number, action: "save" | "restore", filename: string): Promise<boolean> {
    try {
      await this.http.json("POST", `/slots/${slot}?action=${action}`, { filename });
      return true;
    } catch (e) {
      // 4xx: refused (a missing file, a bad name); 501: the server has no --slot-save-path.
      const refused =
        e instanceof EngineInputError || (e instanceof EngineUnavailableError && e.status === 501);
      if (!refused) throw e;
      if (action === "save") {
        this.off = `the server refused to save a slot (is it running with --slot-save-path?): ${e.message}`;
        this.saved = undefined;
      }
      return false;
    }
  }
}
