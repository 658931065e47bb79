/** The `--workload` / `--mmlu-dir` choices `prefixmesh sim` and `prefixmesh bench` share. */
import { existsSync } from "node:fs";
import type { Command } from "commander";
import {
  CHAT_STARTS,
  type ChatStart,
  DEFAULT_ACTIVE,
  DEFAULT_CONVERSATIONS,
  DEFAULT_THINK_MS,
  MAX_ACTIVE,
  MAX_CONVERSATIONS,
  MAX_THINK_MS,
} from "../workload/chat.js";
import { DEFAULT_TURNS, MAX_TURNS, parseTurns, type TurnDistribution } from "../workload/chat-turns.js";
import { DEFAULT_ZIPF_S, MAX_ZIPF_S, type SkewOptions } from "../workload/schedule.js";
import type { Workload } from "../workload/types.js";
import { CliError, parseNumber } from "./errors.js";

export const WORKLOADS = [
  "synthetic",
  "mmlu",
  "mmlu-skewed",
  "synthetic-skewed",
  "mmlu-zipf",
  "synthetic-zipf",
  "mmlu-chat",
  "synthetic-chat",
] as const;
export type WorkloadName = (typeof WORKLOADS)[number];

/** Where the MMLU CSVs live in the shared checkout (beside the repository). */
export const DEFAULT_MMLU_DIR = "../shared/datasets/mmlu";

export function parseWorkloadName(raw: string): WorkloadName {
  if (!(WORKLOADS as readonly string[]).includes(raw)) {
    throw new CliError(`--workload must be one of ${WORKLOADS.join(", ")}, got '${raw}'`);
  }
  return raw as WorkloadName;
}

/** The raw schedule flags, as commander hands them over (see addWorkloadOptions). */
export interface WorkloadFlagValues {
  /** Given only when typed: a synthetic workload reads no data, so a folder named for it is a mistake. */
  mmluDir?: string;
  zipfS?: string;
  /** `--no-repeats` sets this to false; commander's default is true. */
  repeats?: boolean;
  conversations?: string;
  turns?: string;
  chatStart?: string;
  chatActive?: string;
  chatEntry?: string;
  thinkMs?: string;
}

/** The chat workloads' parameters, checked. */
export interface ChatChoice {
  conversations: number;
  turns: TurnDistribution;
  start: ChatStart;
  entry: "spread" | "sticky";
  /** Closed loop only. */
  active?: number;
  /** Open loop only. */
  thinkMs?: number;
}

/** A checked workload choice: the name plus its schedule parameters. */
export interface WorkloadChoice {
  name: WorkloadName;
  /** The skew, for the skewed and Zipf workloads. */
  skew?: Partial<SkewOptions>;
  chat?: ChatChoice;
}

const isZipf = (n: WorkloadName) => n.endsWith("-zipf");
const isChat = (n: WorkloadName) => n.endsWith("-chat");
const CHAT_ENTRIES = ["spread", "sticky"] as const;
/** Chat flags, named as on the command line. */
const CHAT_FLAGS = [
  ["conversations", "--conversations"],
  ["turns", "--turns"],
  ["chatStart", "--chat-start"],
  ["chatActive", "--chat-active"],
  ["chatEntry", "--chat-entry"],
  ["thinkMs", "--think-ms"],
] as const;
const isSkewed = (n: WorkloadName) => n.endsWith("-skewed") || isZipf(n);

/**
 * The schedule flags both commands take, with their help; `--think-ms` only where there is an open
 * loop (`sim --rate`): `bench` runs closed loops only, where the flag could never be used.
 */
export function addWorkloadOptions(cmd: Command, o: { openLoop: boolean } = { openLoop: true }): Command {
  cmd
    .option(
      "--zipf-s <s>",
      `Zipf exponent for the *-zipf workloads: P(subject of rank k) ∝ k^-s, s in (0, ${MAX_ZIPF_S}] (default ${DEFAULT_ZIPF_S})`,
    )
    .option(
      "--no-repeats",
      "skewed and Zipf workloads: draw each question at most once (default: with replacement, so questions repeat)",
    )
    .option(
      "--conversations <n>",
      `chat workloads: number of conversations (default ${DEFAULT_CONVERSATIONS})`,
    )
    .option(
      "--turns <spec>",
      `chat workloads: turns per conversation, N | MIN-MAX (uniform) | geo:MEAN (geometric), at most ${MAX_TURNS} (default ${DEFAULT_TURNS})`,
    )
    .option(
      "--chat-start <start>",
      `chat workloads: what a conversation opens with: ${CHAT_STARTS.join(" | ")} (the subject's 5-shot prefix, or one system prompt shared by all; default few-shot)`,
    )
    .option(
      "--chat-active <n>",
      `chat workloads, closed loop: conversations in progress at once, interleaved at random (default ${DEFAULT_ACTIVE})`,
    )
    .option(
      "--chat-entry <mode>",
      "chat workloads: spread = requests enter nodes round-robin (default); sticky = a conversation always enters the same node",
    );
  if (o.openLoop)
    cmd.option(
      "--think-ms <ms>",
      `chat workloads, open loop (--rate): mean think time between an answer and the next turn (default ${DEFAULT_THINK_MS})`,
    );
  return cmd;
}

/** Checks the name and every schedule flag against it: a flag the workload cannot use is an error. */
export function parseWorkloadChoice(
  rawName: string,
  f: WorkloadFlagValues,
  opts: { openLoop: boolean } = { openLoop: false },
): WorkloadChoice {
  const name = parseWorkloadName(rawName);
  if (f.mmluDir !== undefined && name.startsWith("synthetic")) {
    throw new CliError(
      `--mmlu-dir applies only to the mmlu* workloads, not '${name}' (e.g. --workload ${name.replace("synthetic", "mmlu")})`,
    );
  }
  if (f.zipfS !== undefined && !isZipf(name)) {
    throw new CliError(
      `--zipf-s applies only to the Zipf workloads (mmlu-zipf, synthetic-zipf), not '${name}'`,
    );
  }
  if (f.repeats === false && !isSkewed(name)) {
    throw new CliError(`--no-repeats applies only to the skewed and Zipf workloads, not '${name}'`);
  }
  if (!isChat(name)) {
    for (const [key, flag] of CHAT_FLAGS) {
      if (f[key] !== undefined)
        throw new CliError(
          `${flag} applies only to the chat workloads (mmlu-chat, synthetic-chat), not '${name}'`,
        );
    }
  }
  const choice: WorkloadChoice = { name };
  if (isChat(name)) choice.chat = parseChatFlags(f, opts.openLoop);
  const repeats = f.repeats !== false;
  if (isZipf(name)) {
    const s =
      f.zipfS === undefined ? DEFAULT_ZIPF_S : parseNumber("--zipf-s", f.zipfS, { min: 0, max: MAX_ZIPF_S });
    if (!(s > 0)) throw new CliError(`--zipf-s must be > 0, got ${f.zipfS}`);
    choice.skew = { kind: "zipf", s, repeats };
  } else if (isSkewed(name)) {
    choice.skew = { kind: "hot-set", repeats };
  }
  return choice;
}

function parseChatFlags(f: WorkloadFlagValues, openLoop: boolean): ChatChoice {
  let turns: TurnDistribution;
  try {
    turns = parseTurns(f.turns ?? DEFAULT_TURNS);
  } catch (err) {
    throw new CliError(`--turns: ${(err as Error).message}`);
  }
  const start = f.chatStart ?? "few-shot";
  if (!(CHAT_STARTS as readonly string[]).includes(start))
    throw new CliError(`--chat-start must be one of ${CHAT_STARTS.join(", ")}, got '${start}'`);
  const entry = f.chatEntry ?? "spread";
  if (!(CHAT_ENTRIES as readonly string[]).includes(entry))
    throw new CliError(`--chat-entry must be one of ${CHAT_ENTRIES.join(", ")}, got '${entry}'`);
  if (openLoop && f.chatActive !== undefined)
    throw new CliError(
      "--chat-active applies to the closed loop; with --rate, conversations start on their own",
    );
  if (!openLoop && f.thinkMs !== undefined)
    throw new CliError(
      "--think-ms applies to the open loop (--rate); in a closed loop the next turn follows at once",
    );
  const c: ChatChoice = {
    conversations:
      f.conversations === undefined
        ? DEFAULT_CONVERSATIONS
        : parseNumber("--conversations", f.conversations, { min: 1, max: MAX_CONVERSATIONS, integer: true }),
    turns,
    start: start as ChatStart,
    entry: entry as ChatChoice["entry"],
  };
  if (f.chatActive !== undefined)
    c.active = parseNumber("--chat-active", f.chatActive, { min: 1, max: MAX_ACTIVE, integer: true });
  if (f.thinkMs !== undefined)
    c.thinkMs = parseNumber("--think-ms", f.thinkMs, { min: 0, max: MAX_THINK_MS });
  return c;
}

/**
 * The named workload: synthetic (MMLU-shaped), or real MMLU from `dir`; `-skewed` draws the paper's
 * 80/20 hot set, `-zipf` a Zipf skew over subjects, `-chat` multi-turn conversations whose prompt is
 * the whole history (src/workload/chat.ts). `nodes` spreads the entry nodes, `text` gives
 * synthetic requests prompt text (for the HTTP API), `openLoopRate` schedules Poisson arrivals. A
 * missing or unreadable folder, or a schedule the pool cannot hold, is a usage error.
 */
export async function loadWorkload(
  choice: WorkloadName | WorkloadChoice,
  o: { dir: string; seed: number; requests?: number; nodes?: number; text?: boolean; openLoopRate?: number },
): Promise<Workload> {
  const c: WorkloadChoice = typeof choice === "string" ? parseWorkloadChoice(choice, {}) : choice;
  const schedule = {
    seed: o.seed,
    ...(c.skew ? { skewed: c.skew } : {}),
    requests: o.requests,
    nodes: o.nodes,
    openLoopRate: o.openLoopRate,
  };
  const chat = c.chat
    ? {
        seed: o.seed,
        conversations: c.chat.conversations,
        turns: c.chat.turns,
        start: c.chat.start,
        entry: c.chat.entry,
        ...(c.chat.active !== undefined ? { active: c.chat.active } : {}),
        ...(c.chat.thinkMs !== undefined ? { thinkMs: c.chat.thinkMs } : {}),
        ...(o.requests !== undefined ? { requests: o.requests } : {}),
        ...(o.nodes !== undefined ? { nodes: o.nodes } : {}),
        ...(o.openLoopRate !== undefined ? { openLoopRate: o.openLoopRate } : {}),
      }
    : undefined;
  if (!c.name.startsWith("mmlu")) {
    const { syntheticMmlu, syntheticChat } = await import("../workload/synthetic.js");
    // Text only where a real node's API needs it (bench); its words cost loading GPT-2's ranks.
    const text = o.text ? (await import("../workload/common-words.js")).commonWords() : undefined;
    try {
      return chat ? syntheticChat({ ...chat, text }) : syntheticMmlu({ ...schedule, text });
    } catch (err) {
      throw scheduleError(c.name, err);
    }
  }
  // The synthetic twin of an MMLU workload: same schedule, MMLU-shaped pool.
  const twin = c.name.replace(/^mmlu/, "synthetic");
  if (!existsSync(o.dir)) {
    throw new CliError(`MMLU data not found at '${o.dir}' (pass --mmlu-dir DIR, or use --workload ${twin})`);
  }
  try {
    if (chat) {
      const { mmluChatWorkload } = await import("../workload/mmlu-chat.js");
      return await mmluChatWorkload({ ...chat, dir: o.dir });
    }
    const { mmluWorkload } = await import("../workload/mmlu-workload.js");
    return await mmluWorkload({ ...schedule, dir: o.dir });
  } catch (err) {
    if (err instanceof RangeError) throw scheduleError(c.name, err);
    throw new CliError(
      `cannot load MMLU from '${o.dir}': ${(err as Error).message} (or use --workload ${twin})`,
    );
  }
}

/**
 * A chat schedule keeps its first `--requests` requests, so one with fewer would run short silently
 * (3 conversations of 2 turns are 6 requests, whatever --requests asks). For a `--requests` the user
 * gave (sim's), not bench's default.
 */
export function checkChatLength(c: WorkloadChoice, requests: number | undefined, w: Workload): Workload {
  if (c.chat && requests !== undefined && w.requests.length < requests)
    throw new CliError(
      `--requests ${requests}: --workload ${c.name} has only ${w.requests.length} requests ` +
        `(${c.chat.conversations} conversations); raise --conversations or lower --requests`,
    );
  return w;
}

/** A schedule the pool cannot satisfy (e.g. more requests than questions without repeats): bad usage. */
function scheduleError(name: string, err: unknown): Error {
  return err instanceof RangeError ? new CliError(`--workload ${name}: ${err.message}`) : (err as Error);
}
