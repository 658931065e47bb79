/** A single self-contained page polling GET /cluster: the node's view of peers, estimates and load. */
export const dashboardHtml = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>prefixmesh node</title>
<style>
body{font:14px system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin-top:1em}td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}.bad{color:#b00;font-weight:bold}
pre{background:#f7f7f7;padding:1em;max-width:60em;overflow:auto}
</style></head><body>
<h1>prefixmesh — node <span id="id">?</span></h1>
<div id="summary"></div>
<table><thead><tr><th>peer</th><th>url</th><th>state</th><th>estimate tokens</th><th>estimate age (s)</th>
<th>push-back</th><th>queue</th></tr></thead><tbody id="peers"></tbody></table>
<h2>raw view</h2><pre id="raw"></pre>
<script>
const esc = (s) => String(s ?? "").replace(/[&<>"]/g, (c) => ({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;"}[c]));
async function tick() {
  try {
    const v = await (await fetch("/cluster")).json();
    document.getElementById("id").textContent = v.id;
    document.getElementById("summary").innerHTML =
      "policy <b>" + esc(v.policy) + "</b> · tree " + esc(v.treeTokens) + " tokens · queue " + esc(v.queueDepth) +
      " · push-back " + (v.pushBackActive ? '<span class="bad">on</span>' : "off") + " · served " + esc(v.served);
    document.getElementById("peers").innerHTML = (v.peers || []).map((p) =>
      "<tr><td>" + esc(p.id) + "</td><td>" + esc(p.url) + "</td><td class=" + (p.suspected ? "bad" : "") + ">" +
      (p.suspected ? "suspected" : "live") + "</td><td>" + esc(p.estimateTokens) + "</td><td>" +
      (p.estimateAgeMs == null ? "–" : (p.estimateAgeMs / 1000).toFixed(1)) + "</td><td>" +
      (p.pushBackActive ? "yes" : "no") + "</td><td>" + esc(p.queueDepth) + "</td></tr>").join("");
    document.getElementById("raw").textContent = JSON.stringify(v, null, 2);
  } catch (e) { document.getElementById("summary").textContent = "unreachable: " + e; }
}
tick(); setInterval(tick, 1000);
</script></body></html>
`;
