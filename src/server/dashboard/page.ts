/**
 * The dashboard's page and style sheet, served as-is. The page holds no inline script or style (the
 * Content-Security-Policy forbids both); app.js fills it from the node's `/cluster` and `/metrics`.
 */

export const PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>prefixmesh dashboard</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/dashboard/uplot.css">
<link rel="stylesheet" href="/dashboard/app.css">
<script src="/dashboard/uplot.js"></script>
<script type="module" src="/dashboard/app.js"></script>
</head>
<body>
<header>
  <h1>prefixmesh <span class="muted">node</span> <span id="node-id">…</span></h1>
  <div id="facts" class="muted"></div>
  <div id="status" class="status" data-state="connecting">connecting…</div>
</header>
<div id="alerts" role="alert" aria-live="polite"></div>
<section>
  <h2>Members <span class="muted small" id="members-note">as this node sees them</span></h2>
  <table id="members">
    <thead><tr>
      <th>node</th><th>liveness</th><th>push-back</th><th>queue</th><th>cached tokens</th>
      <th>estimate age</th><th>RTT</th><th>served (for itself / peers)</th><th>trust</th>
    </tr></thead>
    <tbody></tbody>
  </table>
  <p class="small" id="seeds" hidden></p>
  <div class="small" id="refused" hidden></div>
  <div class="small" id="departed" hidden></div>
  <div class="small" id="membership" hidden></div>
  <p class="muted small">Cached tokens: this node's own radix tree, and for a peer the estimate this node holds of
  its tree (from anti-entropy). A down peer's estimate is stale and not shown as current.</p>
</section>
<section>
  <h2>Over time <span class="muted small" id="windows"></span></h2>
  <div class="charts">
    <figure id="chart-share"><figcaption>Requests served by each node, mesh-wide (% of the window;
      the paper's Figure 3, live; each peer's count as its snapshots report it)</figcaption>
      <div class="plot"></div></figure>
    <figure id="chart-route"><figcaption>Requests entering here: served locally vs forwarded
      (per second)</figcaption><div class="plot"></div></figure>
    <figure id="chart-hit"><figcaption>Prefix-cache hit rate: predicted at routing vs actual at the
      engine (% of prompt tokens)</figcaption><div class="plot"></div></figure>
    <figure id="chart-gossip"><figcaption>Anti-entropy gossip, all peers (bytes per
      second)</figcaption><div class="plot"></div></figure>
    <figure id="chart-latency"><figcaption>End-to-end latency of requests entering here
      (ms)</figcaption><div class="plot"></div></figure>
    <figure id="totals"><figcaption>Counts at this node since it started</figcaption>
      <dl class="totals"></dl></figure>
  </div>
</section>
<footer class="muted small">Polls <code>/cluster</code> and <code>/metrics</code> of this node only;
every node serves this page.</footer>
</body>
</html>
`;

export const PAGE_CSS = `
:root { --fg:#1d232b; --muted:#667085; --line:#d9dee5; --bg:#ffffff; --panel:#f6f8fa;
  --live:#1a7f37; --suspected:#b35900; --down:#c21f1f; --unknown:#667085; }
* { box-sizing: border-box; }
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
  background: var(--bg); margin: 0; padding: 16px 24px 24px; }
h1 { font-size: 22px; margin: 0; }
h2 { font-size: 16px; margin: 18px 0 6px; }
header { display: flex; align-items: baseline; gap: 18px; flex-wrap: wrap; }
.muted { color: var(--muted); font-weight: normal; }
.small { font-size: 12px; }
.status { margin-left: auto; padding: 2px 10px; border-radius: 12px; font-weight: 600; background: var(--panel); }
.status[data-state="ok"] { color: var(--live); }
.status[data-state="unreachable"] { color: #fff; background: var(--down); }
#alerts:empty { display: none; }
#alerts { margin-top: 10px; }
.alert { padding: 6px 12px; border-radius: 6px; margin: 4px 0; border-left: 5px solid; }
.alert.down, .alert.self { border-color: var(--down); background: #fdecec; }
.alert.suspected, .alert.seed { border-color: var(--suspected); background: #fff4e5; }
.alert.unknown { border-color: var(--unknown); background: var(--panel); }
table { border-collapse: collapse; width: 100%; }
th, td { padding: 5px 10px; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th { background: var(--panel); font-weight: 600; font-size: 12px; color: var(--muted); }
th:first-child, td:first-child, th:nth-child(2), td:nth-child(2) { text-align: left; }
td.num { font-variant-numeric: tabular-nums; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 6px; }
.badge { display: inline-block; min-width: 84px; padding: 1px 8px; border-radius: 10px; font-weight: 600;
  font-size: 12px; text-align: center; }
.badge.live { background: #dafbe1; color: var(--live); }
.badge.suspected { background: #fff1d6; color: var(--suspected); }
.badge.down { background: var(--down); color: #fff; }
.badge.unknown { background: var(--panel); color: var(--unknown); }
.seed.joined { color: var(--live); }
.seed.unreachable, .seed.unresolvable, .seed.refused { color: var(--suspected); }
#refused ul, #departed ul { margin: 4px 0; padding-left: 18px; }
#refused li, #departed li { margin: 2px 0; overflow-wrap: anywhere; }
#membership { margin: 6px 0; }
#membership > div { margin: 2px 0; }
.swim.alerting { color: var(--down); background: #fdecec; padding: 0 4px; border-radius: 4px; font-weight: 600; }
.rise { color: var(--suspected); font-weight: 600; }
.swim.context .rise { color: inherit; font-weight: normal; }
.code { color: var(--suspected); font-weight: 600; font-family: ui-monospace, monospace; }
tr.down td:not(:nth-child(2)) { color: var(--muted); }
.stale { color: var(--muted); font-style: italic; }
.yes { color: var(--suspected); font-weight: 600; }
body.unreachable section { opacity: 0.45; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 14px; }
figure { margin: 0; padding: 8px 10px 4px; border: 1px solid var(--line); border-radius: 8px; }
figcaption { font-size: 13px; font-weight: 600; margin-bottom: 4px; }
.plot { min-height: 230px; }
.totals { display: grid; grid-template-columns: repeat(2, 1fr); gap: 6px 18px; margin: 10px 4px; }
.totals div { display: flex; justify-content: space-between; border-bottom: 1px dotted var(--line);
  padding: 3px 0; }
.totals dt { color: var(--muted); }
.totals dd { margin: 0; font-weight: 600; font-variant-numeric: tabular-nums; }
footer { margin-top: 14px; }
`;
