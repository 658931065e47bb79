/** The engine's own health check for `/ready`, refreshed in the background (never per request). */
import type { Engine } from "../../core/engine.js";

const CHECK_EVERY_MS = 5_000;

export class EngineHealth {
  private state: { ok: boolean; detail?: string } = { ok: true };
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly engine: Engine) {}

  /** The last check's answer (healthy until the first one says otherwise). */
  get current(): { ok: boolean; detail?: string } {
    return this.state;
  }

  start(): void {
    const check = () =>
      this.engine.health().then(
        (h) => {
          this.state = h;
        },
        (err: Error) => {
          this.state = { ok: false, detail: err.message };
        },
      );
    void check();
    this.timer = setInterval(check, CHECK_EVERY_MS);
    this.timer.unref?.();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }
}
