/**
 * The fault classes of `prefixmesh experiment faults` (issue 18): one fault each, placed in virtual
 * time relative to the fault-free run's span T of the same loop, so closed and open loop meet the same
 * shape of fault. Transient faults happen inside the run and end (their convergence is measured);
 * misbehaving peers, slow nodes and the unbounded request are persistent for the run or the request.
 */
import type { SimFaults } from "../../sim/types.js";

/** Requests per run and loop the committed report (and the targets) are read at. */
export const MEASURED_REQUESTS = 10_000;

/** The victims: the slow node is n1, the misbehaving peer n3, the frozen node n2 (of 4). */
export const SLOW_NODE = 1;
export const BAD_PEER = 3;
export const FROZEN_NODE = 2;
/** The spot-check rate the lying-peer class runs with (the target's 5%). */
export const SPOT_CHECK_RATE = 0.05;
/** An unbounded request fills this context (the 32k), less its prompt. */
export const CONTEXT_TOKENS = 32_768;

export interface ClassContext {
  /** Virtual span (ms) of the fault-free run of the same loop. */
  spanMs: number;
  requests: number;
  /** Prompt tokens of each workload request (the unbounded request fills the context after it). */
  promptTokens(index: number): number;
  /** max_tokens a chat request without one gets from the daemon's API (chatMaxTokensDefault). */
  chatMaxTokensDefault: number;
}

export interface ClassSetup {
  faults?: SimFaults;
  /** Node settings on top of the daemon's (DAEMON_NODE_DEFAULTS). */
  node?: { spotCheckRate?: number; offload?: boolean; maxWaitMs?: number };
  /** Nodes in the cluster (default 4). */
  nodes?: number;
  /** When the fault starts and ends (virtual ms); end undefined: it lasts the whole run. */
  startMs: number;
  endMs?: number;
  /** The unbounded request's index (its own window is read from its record). */
  unbounded?: number;
  /** What the fault is, in a line, with its `prefixmesh sim` flags when it has some. */
  what: string;
}

export interface FaultClass {
  id: string;
  label: string;
  setup(c: ClassContext): ClassSetup;
}

const ms = (x: number) => Math.round(x);

function window(c: ClassContext, from: number, to: number): { startMs: number; endMs: number } {
  return { startMs: ms(from * c.spanMs), endMs: ms(to * c.spanMs) };
}

/**
 * Link faults run from the start until 0.7 T (the simulator's link faults have an end, no start). Their
 * description ends with the `sim` flags that replay them, the end included.
 */
function link(
  c: ClassContext,
  f: { lossProb?: number; dupProb?: number; reorderProb?: number; reorderMaxMs?: number },
  what: string,
  flags: string,
): ClassSetup {
  const endMs = ms(0.7 * c.spanMs);
  const replay = `(${flags} --faults-until-ms ${endMs})`;
  return { faults: { network: { ...f, untilMs: endMs } }, startMs: 0, endMs, what: `${what} ${replay}` };
}

function unbounded(c: ClassContext, maxTokens: (index: number) => number, what: string): ClassSetup {
  const index = Math.floor(0.3 * c.requests);
  const tokens = maxTokens(index);
  return {
    faults: { client: { unbounded: [{ request: index, maxTokens: tokens }] } },
    startMs: 0,
    unbounded: index,
    what: `request ${index} asks for ${tokens} output tokens ${what}`,
  };
}

export const FAULT_FREE: FaultClass = {
  id: "fault-free",
  label: "fault-free",
  setup: () => ({ startMs: 0, endMs: 0, what: "no fault" }),
};

/** The same cluster without the misbehaving peer (the stalling-peer target's reference). */
export const WITHOUT_BAD_PEER: FaultClass = {
  id: "fault-free-3",
  label: "fault-free, 3 nodes",
  setup: () => ({ nodes: 3, startMs: 0, endMs: 0, what: "no fault, n3 absent (3 nodes)" }),
};

export const FAULT_CLASSES: readonly FaultClass[] = [
  {
    id: "crash-restart",
    label: "crash and restart",
    setup: (c) => {
      const w = window(c, 0.3, 0.4);
      return {
        faults: { node: { crashes: [{ node: 1, atMs: w.startMs, restartAtMs: w.endMs }] } },
        ...w,
        what: `n1 crashes at 0.3 T and restarts empty at 0.4 T (--crash 1@${w.startMs}:${w.endMs})`,
      };
    },
  },
  {
    id: "loss-5",
    label: "5% loss",
    setup: (c) => link(c, { lossProb: 0.05 }, "5% of all peer messages lost until 0.7 T", "--loss 0.05"),
  },
  {
    id: "loss-30",
    label: "30% loss",
    setup: (c) => link(c, { lossProb: 0.3 }, "30% of all peer messages lost until 0.7 T", "--loss 0.3"),
  },
  {
    id: "duplication",
    label: "duplication",
    setup: (c) =>
      link(c, { dupProb: 0.1 }, "10% of all peer messages delivered twice until 0.7 T", "--dup 0.1"),
  },
  {
    id: "reordering",
    label: "reordering",
    setup: (c) =>
      link(
        c,
        { reorderProb: 0.1, reorderMaxMs: 100 },
        "10% of peer messages delayed by up to 100 ms more until 0.7 T",
        "--reorder 0.1 --reorder-max-ms 100",
      ),
  },
  {
    id: "partitions",
    label: "partitions that heal",
    setup: (c) => {
      const a = window(c, 0.2, 0.23);
      const b = window(c, 0.5, 0.53);
      return {
        faults: {
          network: {
            partitions: [
              {
                ...a,
                groups: [
                  [0, 1],
                  [2, 3],
                ],
              },
              { ...b, groups: [[3], [0, 1, 2]] },
            ],
          },
        },
        startMs: a.startMs,
        endMs: b.endMs,
        what: `{n0,n1}|{n2,n3} for 0.03 T at 0.2 T, then {n3}|{n0,n1,n2} for 0.03 T at 0.5 T (--partition 0,1/2,3@${a.startMs}:${a.endMs} 3/0,1,2@${b.startMs}:${b.endMs})`,
      };
    },
  },
  {
    id: "wrong-detector",
    label: "wrong failure detector",
    setup: (c) => {
      const w = window(c, 0.3, 0.31);
      return {
        faults: { node: { pauses: [{ node: FROZEN_NODE, atMs: w.startMs, untilMs: w.endMs }] } },
        ...w,
        what: `n${FROZEN_NODE} frozen (alive, silent) for 0.01 T at 0.3 T: its peers suspect it, then declare it down, wrongly (--pause ${FROZEN_NODE}@${w.startMs}:${w.endMs})`,
      };
    },
  },
  ...[3, 10].map(
    (factor): FaultClass => ({
      id: `slow-${factor}x`,
      label: `one node ${factor}× slower`,
      setup: () => ({
        faults: { engine: { slowdowns: [{ node: SLOW_NODE, factor }] } },
        startMs: 0,
        what: `n${SLOW_NODE}'s engine ${factor}× slower for the whole run (--slow-node ${SLOW_NODE}:${factor})`,
      }),
    }),
  ),
  {
    id: "stalling-peer",
    label: "stalling peer",
    setup: () => ({
      faults: { node: { stalls: [{ node: BAD_PEER }] } },
      startMs: 0,
      what: `n${BAD_PEER} acks every forward and never answers it, the whole run (--stall ${BAD_PEER})`,
    }),
  },
  {
    id: "lying-peer",
    label: "lying peer (spot checks 5%)",
    setup: () => ({
      faults: { node: { lies: [{ node: BAD_PEER }] } },
      node: { spotCheckRate: SPOT_CHECK_RATE },
      startMs: 0,
      what: `n${BAD_PEER}'s answers to forwards carry wrong text, the whole run; every node spot-checks ${100 * SPOT_CHECK_RATE}% of peers' deterministic answers (--lie ${BAD_PEER}, spotCheckRate ${SPOT_CHECK_RATE})`,
    }),
  },
  {
    id: "refusing-peer",
    label: "refusing peer",
    setup: () => ({
      faults: { node: { refuses: [{ node: BAD_PEER }] } },
      startMs: 0,
      what: `n${BAD_PEER} answers every forward with a 503, the whole run (--refuse ${BAD_PEER})`,
    }),
  },
  {
    id: "unbounded",
    label: "unbounded request",
    setup: (c) =>
      unbounded(
        c,
        (i) => CONTEXT_TOKENS - c.promptTokens(i),
        `(no max_tokens, generating until a ${CONTEXT_TOKENS}-token context is full)`,
      ),
  },
  {
    id: "unbounded-api",
    label: "no max_tokens, as the daemon's API bounds it",
    setup: (c) =>
      unbounded(
        c,
        () => c.chatMaxTokensDefault,
        "(a chat request without max_tokens gets the daemon's chatMaxTokensDefault)",
      ),
  },
];

/**
 * Not the shipped configuration: open-loop re-runs of classes whose target the daemon's defaults miss,
 * with a setting the daemon has but leaves off, to see whether it is the cause.
 */
export const INVESTIGATIONS: readonly {
  base: string;
  id: string;
  label: string;
  node: ClassSetup["node"];
}[] = [
  {
    base: "unbounded",
    id: "unbounded+offload",
    label: "unbounded request, offload on",
    node: { offload: true },
  },
  {
    base: "slow-10x",
    id: "slow-10x+offload",
    label: "one node 10× slower, offload on",
    node: { offload: true },
  },
];
