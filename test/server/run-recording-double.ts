/** A test double shared by the retokenize tests whose engine steps end only as the test says. */
import type { EngineChunk, EngineRequest, EngineResult } from "../../src/core/engine.js";
import { TestSimEngine } from "./helpers.js";

/** Settles only by `signal`'s abort, failing as an aborted remote call does. */
export function abortOnly(signal: AbortSignal | undefined): Promise<never> {
  return new Promise((_go, fail) => signal?.addEventListener("abort", () => fail(new Error("aborted"))));
}

/** Test double: the simulator's engine, recording the request id of every run it is given. */
export class RunRecordingDouble extends TestSimEngine {
  /** Request ids of the runs this engine was given. */
  readonly ran: string[] = [];
  override run(
    req: EngineRequest,
    onChunk?: (c: EngineChunk) => void,
    signal?: AbortSignal,
  ): Promise<EngineResult> {
    this.ran.push(req.id);
    return super.run(req, onChunk, signal);
  }
}
