/** The paper's figures the report's prose quotes, and the skew as the schedule draws it. */

import { PAPER_SKEW } from "../../workload/schedule.js";
import { MMLU_SUBJECT_SHAPES } from "../../workload/synthetic.js";
import { PAPER_TABLE1, PAPER_TABLE3 } from "../paper-data.js";

/** The paper's figures the prose quotes, derived from the transcribed tables (never typed twice). */
export const P_NO = PAPER_TABLE1.comm[0].noRoute;
export const P_C2 = PAPER_TABLE1.comm[0];
export const P_C200 = PAPER_TABLE1.comm[1];
export const P_SK = PAPER_TABLE1.skewed;
/** Table 3's routed uniform hotspots at Δpoll ≤ 2 s (the range finding 3 quotes; 300 s is finding 4's). */
export const P_HOT = [
  ...PAPER_TABLE3.comm.map((c) => c.hotspot),
  ...PAPER_TABLE3.poll.filter((c) => c.pollMs <= 2000).map((c) => c.hotspot),
];
/** MMLU's subjects (one shape each in the synthetic stand-in); the paper's skew as the schedule draws it. */
export const MMLU_SUBJECTS = MMLU_SUBJECT_SHAPES.length;
export const SKEW_SHARE = Math.round(PAPER_SKEW.hotShare * 100);
export const SKEW_HOT = Math.round(PAPER_SKEW.hotFraction * 100);
export const P_HOT_RANGE = `${Math.round(Math.min(...P_HOT) * 100)}–${Math.round(Math.max(...P_HOT) * 100)}%`;
