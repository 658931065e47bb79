/**
 * Whether the node takes a client request at all, before the core sees it: refusals that need no
 * routing (shutting down, too many clients waiting, an engine that cannot keep the request's cache
 * namespace apart), each with the status and code the client is told.
 */
import type { Engine } from "../../core/engine.js";
import type { Admission, InferenceInput } from "../service.js";
import { ServiceError } from "../service.js";

export interface AdmissionState {
  /** Starting: still booting (calibrating its engine); resetting: emptying its cache; stopping: shutting down. */
  phase: "starting" | "open" | "resetting" | "stopping";
  /** Clients waiting for an answer or still in the intake (`--max-pending` bounds both), and the bound. */
  pending: number;
  max: number;
}

/** A client request arriving once shutdown has begun: retryable, the leaving node's peers take over. */
export function shuttingDownError(): ServiceError {
  return new ServiceError(503, "server_error", "node is shutting down", 1);
}

/** A client request beyond `--max-pending`: retryable, in a moment or at another node. */
export function overloadedError(): ServiceError {
  return new ServiceError(429, "rate_limit_error", "node overloaded: too many requests in flight", 1);
}

/** The refusal a client request meets in `phase`, if any (the same at admission and at submit). */
export function phaseError(phase: AdmissionState["phase"]): ServiceError | undefined {
  // Both retryable: a booting node is ready in moments, a leaving one's peers take over.
  if (phase === "starting") return new ServiceError(503, "server_error", "node is starting", 1);
  if (phase === "stopping") return shuttingDownError();
  // A request taken while the engine empties its cache would be dropped by the restart that follows.
  if (phase === "resetting") return new ServiceError(503, "server_error", "node is resetting its cache", 1);
  return undefined;
}

export function admissionError(
  s: AdmissionState,
  engine: Engine,
  input: InferenceInput,
): ServiceError | undefined {
  const refused = phaseError(s.phase);
  if (refused) return refused;
  if (s.pending >= s.max) return overloadedError();
  // An engine that would share the namespace's cache: refused here, where the client hears why.
  return namespaceRefusal(engine, input);
}

/**
 * The refusal of a request whose namespace (`cacheSalt`, `adapter`) `engine` cannot keep apart, if so;
 * at admission, and for a run refused by an engine that learnt it only then. A request for a model
 * this node does not serve (`tokenizer` set) runs elsewhere: that engine judges.
 */
export function namespaceRefusal(
  engine: Engine,
  r: Pick<InferenceInput, "tokenizer" | "cacheSalt" | "adapter">,
): ServiceError | undefined {
  const problem = r.tokenizer === undefined ? engine.namespaceProblem?.(r) : undefined;
  if (problem)
    return new ServiceError(400, "invalid_request_error", problem, undefined, "cache_salt_unsupported");
  return undefined;
}

/**
 * Client requests taken in and not yet submitted (templating, tokenizing; a `/tokenize` until it is
 * answered): the drain waits for them, and one submitted while the node drains is served; one
 * submitted after the drain ended is not. They count against `--max-pending` with the waiting clients,
 * so a burst of prompts cannot make the node tokenize without bound.
 */
export class ClientIntake {
  private readonly open = new Set<Admission>();
  private drained = false;

  /**
   * A request taken in; refused, before any templating or tokenizing, in a `phase` that would refuse
   * it at submit (a `/tokenize`, no request to serve: only once shutdown began), and (429) when the
   * `waiting` clients and the requests already in the intake reach `max`.
   */
  admit(phase: AdmissionState["phase"], waiting: number, max: number, serves = true): Admission {
    const refused = serves || phase === "stopping" ? phaseError(phase) : undefined;
    if (refused) throw refused;
    if (waiting + this.open.size >= max) throw overloadedError();
    const admission: Admission = { end: () => this.open.delete(admission) };
    this.open.add(admission);
    return admission;
  }

  /** What `admission` was at its submit (from then on a waiting client, no longer counted here). */
  submitted(admission: Admission | undefined): "admitted" | "after-drain" | "new" {
    if (admission === undefined || !this.open.delete(admission)) return "new";
    return this.drained ? "after-drain" : "admitted";
  }

  /** Requests taken in and not yet submitted. */
  get size(): number {
    return this.open.size;
  }

  endDrain(): void {
    this.drained = true;
  }
}

/** The phase a client request meets at its submit; one taken in before shutdown is served while the node drains. */
export function intakePhase(
  started: boolean,
  stopping: boolean,
  resetting: boolean,
): AdmissionState["phase"] {
  if (!started) return "starting";
  if (stopping) return "stopping";
  return resetting ? "resetting" : "open";
}
