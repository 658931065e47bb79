/** The shape of `experiment paper`'s results.json: what paper.ts computes and report.ts writes up. */
import type { CostProfile } from "../engines/sim/profiles.js";
import type { zoneSummary } from "./analysis.js";
import type { RunResult } from "./execute.js";
import type { SharePanel } from "./figures.js";
import type { ExperimentRun, WorkloadKind } from "./grid.js";
import type { PAPER_SETUP, PAPER_TABLE1, PAPER_TABLE2, PAPER_TABLE3 } from "./paper-data.js";

export interface WorkloadSummary {
  kind: WorkloadKind;
  name: string;
  schedule: string;
  requests: number;
  distinctPrompts: number;
  repeatedRequests: number;
  meanPromptTokens: number;
  idealHit: number;
  hotGroups?: string[];
}

export interface RunSummary extends ExperimentRun, Omit<RunResult, "id" | "served"> {
  idealHit: number;
}

export interface ShareFigureData {
  subjects: string[];
  /** How the subjects were chosen (printed in the report). */
  selection?: string;
  panels: (SharePanel & { zoneSummary?: ReturnType<typeof zoneSummary> })[];
  /** Per configuration: over every subject with ≥ 300 requests, how many show each zone. */
  cycles?: CycleStats[];
}

export interface CycleStats {
  config: string;
  subjects: number;
  withSpecialization: number;
  withRedispersion: number;
  withAllThree: number;
}

export interface PaperResults {
  generatedBy: string;
  command: string;
  synthetic: boolean;
  seed: number;
  nodes: number;
  profile: CostProfile;
  encoding?: string;
  capacities: { paper: number; constrained: number; constrainedFraction: number; prefixWorkingSet: number };
  workloads: Record<string, WorkloadSummary>;
  runs: RunSummary[];
  figure3: ShareFigureData;
  figure4: ShareFigureData;
  paper: {
    table1: typeof PAPER_TABLE1;
    table2: typeof PAPER_TABLE2;
    table3: typeof PAPER_TABLE3;
    setup: typeof PAPER_SETUP;
  };
  wallMs: number;
}
