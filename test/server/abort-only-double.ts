/** A test double shared by the intake's step tests (tokenize-timeout, tokenize-hang-up). */
import type { ChatMessage, Tokens } from "../../src/core/engine.js";
import { TestSimEngine } from "./helpers.js";

/**
 * Test double: the simulator's engine whose tokenize, or chat template, once `hang` is set, answers
 * only its signal's abort (as a remote engine's aborted HTTP request ends): `held` counts the steps
 * it holds, `aborted` those its abort ended.
 */
export class AbortOnlyDouble extends TestSimEngine {
  hang: "tokenize" | "template" | undefined;
  held = 0;
  aborted = 0;
  private wait<T>(signal: AbortSignal | undefined): Promise<T> {
    this.held++;
    return new Promise<T>((_go, fail) =>
      signal?.addEventListener("abort", () => {
        this.aborted++;
        fail(new Error("aborted"));
      }),
    );
  }
  override async tokenize(text: string, signal?: AbortSignal): Promise<Tokens> {
    return this.hang === "tokenize" ? this.wait(signal) : super.tokenize(text);
  }
  override async applyChatTemplate(messages: ChatMessage[], signal?: AbortSignal): Promise<string> {
    return this.hang === "template" ? this.wait(signal) : super.applyChatTemplate(messages);
  }
}
