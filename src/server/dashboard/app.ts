/// <reference lib="dom" />
/**
 * The dashboard in the browser: polls this node's `/cluster` and `/metrics` every second (`?every=ms`
 * changes it), fills the members table, the totals and the alerts, and has charts.ts draw the charts.
 * Built DOM nodes only, no HTML strings: nothing a peer advertises can inject markup, and
 * the page's Content-Security-Policy holds without inline styles or scripts.
 */

import type { RefusedView } from "../../core/refusals.js";
import { colourOf, drawCharts } from "./charts.js";
import { departedLines, peerAlertText } from "./departed.js";
import { $, el } from "./dom.js";
import { showMembership } from "./membership-view.js";
import { fmtSec, refusedLines } from "./refused.js";
import { History, parseMetrics, readingOf, servedByMember, WINDOWS } from "./series.js";

interface PeerView {
  id: string;
  url?: string;
  liveness: "unknown" | "live" | "suspected" | "down";
  estimateTokens: number;
  estimateAgeMs?: number | null;
  /** gossip "scuttlebutt": a dead or departed member, remembered for a while: ms since it went. */
  goneForMs?: number;
  /** With `goneForMs`: "left" said goodbye (a planned stop), "dead" declared dead. */
  gone?: "left" | "dead";
  queueDepth?: number;
  pushBackActive: boolean;
  rttMs?: number | null;
  /** Requests it has served, as its snapshots say (null: never said). */
  served?: number | null;
  /** What its answers earned it (null: not tracked); its breaker decides whether it is routed to. */
  trust?: { state: string; score: number } | null;
}
interface ClusterView {
  id: string;
  cluster?: string;
  model?: string;
  engine?: string;
  policy?: string;
  treeTokens: number;
  capacityTokens?: number;
  queueDepth: number;
  pushBackActive: boolean;
  /** Requests this node has served (for its clients and for peers) in its epoch. */
  served?: number;
  /** The node's counters: numbers, and per-kind counts for snapshots. */
  stats?: Record<string, number | Record<string, number>>;
  peers: PeerView[];
  /** gossip "scuttlebutt": each --join seed and what became of it (runtime/seed-states.ts). */
  seeds?: SeedView[];
  /** Candidates this node refuses (another cluster, model, protocol or mode; no credential). */
  refused?: RefusedView[];
  /** The trust kept of peers out of the membership (departed.ts reads it). */
  departedTrust?: unknown;
  /** gossip "scuttlebutt": the SWIM failure detector's counts (membership.ts reads them). */
  membership?: unknown;
  /** The node's --gossip mode (absent from an older node). */
  gossip?: unknown;
}
interface SeedView {
  seed: string;
  state: string;
  attempts: number;
  error: string | null;
  memberId: string | null;
  /** SWIM's status of the member it turned out to be (null: not a member). */
  member: string | null;
  /** What its host resolved to in the last attempt, and the address it reached (older nodes: none). */
  addresses?: string[];
  reached?: string | null;
}

const params = new URLSearchParams(location.search);
const EVERY_MS = Math.min(60_000, Math.max(250, Number(params.get("every")) || 1000));

const fmtInt = (n: number) => Math.round(n).toLocaleString("en-US");

const history = new History();
let view: ClusterView | undefined;
let lastOk: number | undefined;

// ---- the members table -------------------------------------------------------------------------

function cell(row: HTMLElement, content: string | HTMLElement, cls?: string): void {
  const td = el("td", typeof content === "string" ? content : null, cls);
  if (typeof content !== "string") td.append(content);
  row.append(td);
}

function badge(liveness: string): HTMLElement {
  return el("span", liveness, `badge ${liveness}`);
}

function nameCell(id: string, self: boolean): HTMLElement {
  const span = el("span");
  const sw = el("span", null, "swatch");
  sw.style.background = colourOf(id);
  span.append(sw, el("b", id));
  if (self) span.append(el("span", " (this node)", "muted"));
  return span;
}

function renderMembers(v: ClusterView): void {
  const body = document.querySelector("#members tbody") as HTMLElement;
  const rows: HTMLElement[] = [];
  const self = el("tr");
  self.dataset.node = v.id;
  self.dataset.liveness = "live";
  self.className = "live";
  cell(self, nameCell(v.id, true));
  cell(self, badge("live"));
  cell(self, v.pushBackActive ? el("span", "advertised", "yes") : "no");
  cell(self, fmtInt(v.queueDepth), "num");
  cell(self, fmtInt(v.treeTokens) + (v.capacityTokens ? ` / ${fmtInt(v.capacityTokens)}` : ""), "num");
  cell(self, "exact", "muted");
  cell(self, "–", "muted");
  const count = (k: string) => {
    const x = v.stats?.[k];
    return fmtInt(typeof x === "number" ? x : 0);
  };
  cell(self, `${fmtInt(v.served ?? 0)} (${count("servedLocal")} / ${count("servedForPeers")})`, "num");
  cell(self, "–", "muted");
  rows.push(self);

  for (const p of v.peers) {
    const tr = el("tr", null, p.liveness);
    tr.dataset.node = p.id;
    tr.dataset.liveness = p.liveness;
    const gone = p.liveness === "down";
    cell(tr, nameCell(p.id, false));
    cell(tr, badge(p.liveness));
    cell(tr, gone ? "–" : p.pushBackActive ? el("span", "pausing us", "yes") : "no");
    cell(tr, gone || p.queueDepth == null ? "–" : fmtInt(p.queueDepth), "num");
    // A down peer's estimate describes a tree that may no longer exist: say so instead of a number.
    cell(
      tr,
      gone
        ? // A member SWIM no longer holds has its estimate dropped: its 0 is no last size.
          el(
            "span",
            p.goneForMs != null ? "stale: dropped" : `stale (last ${fmtInt(p.estimateTokens)})`,
            "stale",
          )
        : p.liveness === "live"
          ? fmtInt(p.estimateTokens)
          : el("span", `${fmtInt(p.estimateTokens)}?`, "stale"),
      "num",
    );
    cell(
      tr,
      p.goneForMs != null ? "dropped" : p.estimateAgeMs == null ? "never heard" : fmtSec(p.estimateAgeMs),
      "num",
    );
    cell(tr, gone || p.rttMs == null ? "–" : `${p.rttMs.toFixed(1)} ms`, "num");
    // What its snapshots last said (a peer of an older version says nothing).
    cell(tr, p.served == null ? "–" : fmtInt(p.served), p.served == null ? "muted" : "num");
    // A live peer whose breaker is not closed is routed to seldom or never: said beside its liveness.
    const t = p.trust;
    if (t == null) cell(tr, "–", "muted");
    else {
      const said = `${t.state} · ${typeof t.score === "number" ? t.score.toFixed(2) : "?"}`;
      cell(tr, t.state === "closed" ? said : el("span", said, "yes"), "num");
    }
    rows.push(tr);
  }
  body.replaceChildren(...rows);
}

/** The --join seeds under the members: what this node was told to join through, and how that went. */
function renderSeeds(v: ClusterView): void {
  const p = $("seeds");
  const seeds = v.seeds ?? [];
  p.hidden = seeds.length === 0;
  const items = seeds.map((s) => {
    const who = s.memberId ? ` as ${s.memberId}${s.member ? `, ${s.member}` : ""}` : "";
    const tries = s.state === "joined" ? "" : `, ${s.attempts} attempt${s.attempts === 1 ? "" : "s"}`;
    const at = s.reached ? ` at ${s.reached}` : s.addresses?.length ? ` (→ ${s.addresses.join(", ")})` : "";
    const span = el("span", `${s.seed}: ${s.state}${who}${at}${tries}`, `seed ${s.state}`);
    span.dataset.seed = s.seed;
    span.dataset.state = s.state;
    if (s.error) span.title = s.error;
    return span;
  });
  const parts: (HTMLElement | string)[] = [el("b", "Seeds (--join): ")];
  for (const [i, item] of items.entries()) parts.push(...(i > 0 ? [" · ", item] : [item]));
  p.replaceChildren(...parts);
}

/** The candidates this node refuses, under the seeds: why (a peer's words: text only), and when asked again. */
function renderRefused(v: ClusterView): void {
  const box = $("refused");
  const { lines, more } = refusedLines(v.refused);
  box.hidden = lines.length === 0;
  const items = lines.map((l) =>
    memberItem(
      l.id,
      "code",
      l.code,
      el("span", l.message, "reason"),
      el("span", ` · ${l.refusals} · ${l.recheck}`, "muted"),
    ),
  );
  fillList(box, "Refused (not admitted as members):", items, more);
}

/** The trust kept of peers out of the membership, under the refused: what each comes back with. */
function renderDeparted(v: ClusterView): void {
  const box = $("departed");
  const { lines, more } = departedLines(v.departedTrust);
  box.hidden = lines.length === 0;
  const items = lines.map((l) => memberItem(l.id, "state", l.state, el("span", ` · ${l.detail}`, "muted")));
  fillList(box, "Gone, trust kept for their return:", items, more);
}

/** A list item of a member: its id, its `key` (code or state) shown and kept as data, then `rest`. */
function memberItem(id: string, key: "code" | "state", value: string, ...rest: HTMLElement[]): HTMLElement {
  const li = el("li");
  li.dataset.member = id;
  li.dataset[key] = value;
  li.append(el("b", id), " ", el("span", value, "code"), " ", ...rest);
  return li;
}

/** `box` as a titled list of `items`, and how many more were left out. */
function fillList(box: HTMLElement, title: string, items: HTMLElement[], more: number): void {
  if (more > 0) items.push(el("li", `and ${more} more`, "muted"));
  const list = el("ul");
  list.replaceChildren(...items);
  box.replaceChildren(el("b", title), list);
}

/** The node's own counters (from /cluster), as a list of term / value pairs. */
function renderTotals(v: ClusterView): void {
  const s = v.stats ?? {};
  const n = (k: string) => {
    const x = s[k];
    return fmtInt(typeof x === "number" ? x : 0);
  };
  const sum = (k: string) => {
    const x = s[k];
    return fmtInt(typeof x === "object" ? Object.values(x).reduce((a, b) => a + b, 0) : 0);
  };
  const items: [string, string][] = [
    ["client requests", n("clientRequests")],
    ["forwarded to peers", n("forwarded")],
    ["served for itself", n("servedLocal")],
    ["served for peers", n("servedForPeers")],
    ["fallbacks", n("fallbacks")],
    ["ack timeouts", n("ackTimeouts")],
    ["forward timeouts", n("forwardTimeouts")],
    ["peer errors", n("peerErrors")],
    ["refused (overload)", n("rejectedOverload")],
    ["engine failures", n("engineFailures")],
    ["snapshots sent", sum("snapshotsSent")],
    ["snapshots received", sum("snapshotsReceived")],
  ];
  const dl = document.querySelector("#totals dl") as HTMLElement;
  dl.replaceChildren(
    ...items.map(([term, value]) => {
      const row = el("div");
      row.append(el("dt", term), el("dd", value));
      return row;
    }),
  );
}

// ---- alerts and status -------------------------------------------------------------------------

function alertLine(kind: string, text: string): HTMLElement {
  const d = el("div", text, `alert ${kind}`);
  d.dataset.kind = kind;
  return d;
}

function renderAlerts(error: string | undefined): void {
  const out: HTMLElement[] = [];
  const now = Date.now();
  const status = $("status");
  if (error !== undefined) {
    const since = lastOk === undefined ? "" : ` Last data ${fmtSec(now - lastOk)} ago.`;
    out.push(
      alertLine(
        "self",
        `This node (${view?.id ?? location.host}) cannot be reached: ${error}.${since} Retrying every ${fmtSec(EVERY_MS)}.`,
      ),
    );
    $("members-note").textContent =
      lastOk === undefined ? "never reached" : `as this node saw them ${fmtSec(now - lastOk)} ago`;
    status.dataset.state = "unreachable";
    status.textContent = "node unreachable";
    document.body.classList.add("unreachable");
  } else {
    $("members-note").textContent = "as this node sees them";
    status.dataset.state = "ok";
    status.textContent = `live · every ${fmtSec(EVERY_MS)}`;
    document.body.classList.remove("unreachable");
  }
  if (view && !view.peers.some((p) => p.liveness === "live"))
    for (const s of view.seeds ?? [])
      if (s.state !== "joined" && s.state !== "self" && s.state !== "pending")
        out.push(alertLine("seed", `Alone: seed ${s.seed} is ${s.state}${s.error ? ` (${s.error})` : ""}.`));
  for (const p of view?.peers ?? []) {
    if (p.liveness !== "live") out.push(alertLine(p.liveness, peerAlertText(p)));
  }
  $("alerts").replaceChildren(...out);
}

function renderFacts(v: ClusterView): void {
  $("node-id").textContent = v.id;
  document.title = `prefixmesh · ${v.id}`;
  const parts = [
    v.cluster && `cluster ${v.cluster}`,
    v.model && `model ${v.model}`,
    v.engine && `engine ${v.engine}`,
    v.policy && `policy ${v.policy}`,
    `${v.peers.length} peer${v.peers.length === 1 ? "" : "s"}`,
  ].filter(Boolean);
  $("facts").textContent = parts.join(" · ");
}

/** The charts (charts.ts) over the history, with the members as last seen. */
function redraw(): void {
  drawCharts(history.points, view ? [view.id, ...view.peers.map((p) => p.id)] : []);
}

// ---- polling -----------------------------------------------------------------------------------

async function fetchText(path: string): Promise<string> {
  const r = await fetch(path, {
    cache: "no-store",
    signal: AbortSignal.timeout(Math.max(2000, EVERY_MS * 2)),
  });
  if (!r.ok) throw new Error(`${path} answered HTTP ${r.status}`);
  return r.text();
}

function describe(err: unknown): string {
  if (err instanceof DOMException && err.name === "TimeoutError") return "no answer in time";
  if (err instanceof TypeError) return "connection failed";
  return err instanceof Error ? err.message : String(err);
}

async function tick(): Promise<void> {
  let error: string | undefined;
  try {
    const [cluster, metrics] = await Promise.all([fetchText("/cluster"), fetchText("/metrics")]);
    view = JSON.parse(cluster) as ClusterView;
    lastOk = Date.now();
    history.add(readingOf(parseMetrics(metrics), lastOk / 1000, servedByMember(view)));
    for (const id of [view.id, ...view.peers.map((p) => p.id)].sort()) colourOf(id);
    renderFacts(view);
    renderMembers(view);
    renderSeeds(view);
    renderRefused(view);
    renderDeparted(view);
    showMembership(view.membership, lastOk / 1000, view.gossip);
    renderTotals(view);
  } catch (err) {
    error = describe(err);
  }
  renderAlerts(error);
  redraw();
  document.body.dataset.ticks = String(Number(document.body.dataset.ticks ?? 0) + 1);
}

$("windows").textContent =
  `shares, hit rates and latency over the last ${WINDOWS.slowSec} s; rates over the last ${WINDOWS.rateSec} s`;

async function loop(): Promise<void> {
  await tick();
  setTimeout(loop, EVERY_MS);
}
void loop();
let resizeTimer: ReturnType<typeof setTimeout> | undefined;
window.addEventListener("resize", () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(redraw, 150);
});
