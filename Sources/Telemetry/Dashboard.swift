/// The dashboard page served at `/`: one self-contained HTML file (no external resources)
/// that renders the cluster from the JSON embedded at load time, then refreshes from
/// `/api/overview` every second: services and their health, rooms, sessions with live ping and
/// rollback graphs, recent events.
public enum Dashboard {
    /// The page, with `initial` (the `/api/overview` JSON) embedded so it renders at once.
    public static func page(initial: String) -> String {
        template.replacingOccurrences(of: "__INITIAL_JSON__", with: embeddable(initial))
    }

    /// `json` made safe inside a `<script>` element and still the same JSON: `<`, `>` and `&`
    /// (which JSON text only holds inside strings) become `\u003c`, `\u003e` and `\u0026`,
    /// so no `</script` or `<!--` can appear.
    public static func embeddable(_ json: String) -> String {
        json.replacingScalars(scriptEscapes)
    }

    private static let scriptEscapes: [Unicode.Scalar: String] = ["<": "\\u003c", ">": "\\u003e", "&": "\\u0026"]

    static let template = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Netplay cluster</title>
<style>
  :root { --bg:#0f1419; --panel:#182028; --line:#2a3642; --text:#dde6ee; --dim:#8a9aa8;
          --ok:#3fb950; --warn:#d29922; --bad:#f85149; --info:#58a6ff; }
  * { box-sizing: border-box; }
  body { margin:0; font:14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; background:var(--bg); color:var(--text); }
  header { display:flex; align-items:center; gap:16px; padding:14px 22px; background:var(--panel); border-bottom:1px solid var(--line); }
  header h1 { font-size:18px; margin:0; }
  .pill { padding:2px 10px; border-radius:999px; font-size:12px; font-weight:600; background:var(--line); }
  .pill.running,.pill.ready { background:rgba(63,185,80,.18); color:var(--ok); }
  .pill.degraded,.pill.starting,.pill.backoff,.pill.unhealthy,.pill.waiting,.pill.stopping,.pill.reporting { background:rgba(210,153,34,.18); color:var(--warn); }
  .pill.failed,.pill.stopped { background:rgba(248,81,73,.18); color:var(--bad); }
  .meta { color:var(--dim); font-size:12px; margin-left:auto; }
  main { display:grid; grid-template-columns: minmax(0,3fr) minmax(0,2fr); gap:16px; padding:16px 22px; }
  section { background:var(--panel); border:1px solid var(--line); border-radius:8px; padding:12px 14px; min-width:0; }
  section h2 { font-size:13px; text-transform:uppercase; letter-spacing:.06em; color:var(--dim); margin:0 0 10px; }
  table { width:100%; border-collapse:collapse; font-variant-numeric:tabular-nums; }
  th, td { text-align:left; padding:5px 6px; border-bottom:1px solid var(--line); white-space:nowrap; }
  th { color:var(--dim); font-weight:500; font-size:12px; }
  td.num { text-align:right; }
  .empty { color:var(--dim); font-style:italic; padding:6px 0; }
  .session { border:1px solid var(--line); border-radius:6px; padding:10px; margin-bottom:12px; }
  .session h3 { margin:0 0 6px; font-size:14px; }
  .graphs { display:grid; grid-template-columns:1fr 1fr; gap:10px; margin-top:8px; }
  .graph { background:#11181f; border:1px solid var(--line); border-radius:4px; padding:4px 6px; }
  .graph .label { font-size:11px; color:var(--dim); }
  svg { width:100%; height:70px; display:block; }
  .legend span { font-size:11px; margin-right:10px; }
  .events { max-height:420px; overflow:auto; font-family: ui-monospace, Menlo, Consolas, monospace; font-size:12px; }
  .ev { padding:3px 0; border-bottom:1px solid var(--line); }
  .ev .t { color:var(--dim); } .ev .topic { color:var(--info); }
  .sev-warning { color:var(--warn); } .sev-error,.sev-critical { color:var(--bad); }
  .wide { grid-column: 1 / -1; }
</style>
</head>
<body>
<header>
  <h1>Netplay cluster <span id="cluster-name"></span></h1>
  <span id="cluster-state" class="pill">…</span>
  <span class="meta" id="meta"></span>
</header>
<main>
  <section><h2>Services</h2><div id="services"></div></section>
  <section><h2>Rooms</h2><div id="rooms"></div></section>
  <section class="wide"><h2>Sessions</h2><div id="sessions"></div></section>
  <section class="wide"><h2>Recent events</h2><div id="events" class="events"></div></section>
</main>
<script type="application/json" id="initial">__INITIAL_JSON__</script>
<script>
"use strict";
const colors = ["#58a6ff", "#3fb950", "#d29922", "#f85149", "#bc8cff", "#39c5cf", "#ff7b72", "#e3b341"];
const esc = s => String(s ?? "").replace(/[&<>"']/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;","\"":"&quot;","'":"&#39;"}[c]));
const pill = s => `<span class="pill ${esc(s)}">${esc(s)}</span>`;
const dur = s => s == null ? "" : s < 60 ? `${s.toFixed(1)} s` : s < 3600 ? `${(s/60).toFixed(1)} min` : `${(s/3600).toFixed(1)} h`;
function table(headers, rows) {
  return `<table><thead><tr>${headers.map(h => `<th>${esc(h)}</th>`).join("")}</tr></thead><tbody>${rows.join("")}</tbody></table>`;
}
function spark(series, max) {
  const w = 300, h = 70;
  const top = Math.max(max || 0, ...series.flatMap(s => s.values), 1);
  const lines = series.map((s, i) => {
    const n = s.values.length;
    if (n === 0) return "";
    const pts = s.values.map((v, j) => `${(n === 1 ? w : (j / (n - 1)) * w).toFixed(1)},${(h - 4 - (v / top) * (h - 8)).toFixed(1)}`);
    return `<polyline fill="none" stroke="${colors[i % colors.length]}" stroke-width="1.6" points="${pts.join(" ")}"/>`;
  }).join("");
  return `<svg viewBox="0 0 ${w} ${h}" preserveAspectRatio="none"><line x1="0" y1="${h-4}" x2="${w}" y2="${h-4}" stroke="#2a3642"/>${lines}</svg>`;
}
function render(data) {
  if (!data) return;
  const svc = data.services || {}, cluster = svc.cluster;
  document.getElementById("cluster-name").textContent = cluster ? `· ${cluster.name}` : "";
  const state = cluster ? cluster.state : "unsupervised";
  const st = document.getElementById("cluster-state");
  st.className = `pill ${state}`; st.textContent = state;
  const t = data.telemetry || {};
  document.getElementById("meta").textContent =
    `telemetry ${t.instance || ""} ${t.version || ""} · up ${dur(t.uptime_s)} · updated ${new Date(t.generated_unix_ms || Date.now()).toLocaleTimeString()}`;
  const inst = svc.instances || [];
  document.getElementById("services").innerHTML = inst.length === 0 ? `<div class="empty">No service is reporting yet.</div>` :
    table(["service", "instance", "state", "pid", "restarts", "uptime", "last report"], inst.map(r =>
      `<tr class="svc-row" data-instance="${esc(r.instance)}"><td>${esc(r.service)}</td><td>${esc(r.instance)}</td><td>${pill(r.state)}</td>` +
      `<td class="num">${r.pid ?? ""}</td><td class="num">${r.restarts ?? ""}</td>` +
      `<td class="num">${dur(r.uptime_s ?? r.reported_uptime_s)}</td><td class="num">${r.last_report_age_s == null ? "—" : dur(r.last_report_age_s) + " ago"}</td></tr>`));
  const rooms = (data.rooms || {}).rooms || [];
  document.getElementById("rooms").innerHTML = rooms.length === 0 ?
    `<div class="empty">No rooms${data.rooms && data.rooms.error ? ` (discovery: ${esc(data.rooms.error)})` : ""}.</div>` :
    table(["room", "host", "game", "players", "spectators", ""], rooms.map(r =>
      `<tr><td>${esc(r.room_name || r.room_id)}</td><td>${esc(r.host_name)}</td><td>${esc(r.game)}</td>` +
      `<td class="num">${r.players}/${r.max_players}</td><td class="num">${r.spectators}/${r.max_spectators}</td>` +
      `<td>${r.in_progress ? pill("running") : pill("waiting")}${r.has_password ? " 🔒" : ""}</td></tr>`));
  const sessions = (data.sessions || {}).sessions || [];
  const more = ((data.sessions || {}).total || 0) - sessions.length;
  document.getElementById("sessions").innerHTML = sessions.length === 0 ? `<div class="empty">No session is reporting HUD stats.</div>` :
    (more > 0 ? `<div class="empty">${more} more sessions: <a href="/api/sessions?history=0">/api/sessions</a></div>` : "") +
    sessions.map(s => {
      const keys = Object.keys(s.history || {}).sort();
      const legend = keys.map((k, i) => `<span style="color:${colors[i % colors.length]}">■ ${esc(k)}</span>`).join("");
      return `<div class="session" data-session="${esc(s.session_id)}"><h3>${esc(s.session_id)} <span class="meta">relay ${esc(s.relay_id)} · frame ${s.confirmed_frame} · desyncs ${s.desyncs} · resyncs ${s.resyncs}</span></h3>` +
        table(["slot", "name", "ping", "jitter", "frame delay", "frames ahead", "rollbacks", "max rollback", "substituted", ""], (s.peers || []).map(p =>
          `<tr><td>${p.slot === 0 ? "spectator" : "P" + p.slot}</td><td>${esc(p.name)}</td><td class="num">${p.ping_ms} ms</td><td class="num">${p.jitter_ms} ms</td>` +
          `<td class="num">${p.frame_delay}</td><td class="num">${p.frames_ahead}</td><td class="num">${p.rollbacks}</td>` +
          `<td class="num">${p.max_rollback_frames}</td><td class="num">${p.substituted_frames}</td><td>${p.connected ? `<span class="pill ready">connected</span>` : `<span class="pill failed">disconnected</span>`}</td></tr>`)) +
        `<div class="graphs"><div class="graph"><div class="label">ping (ms)</div>${spark(keys.map(k => ({values: s.history[k].ping_ms})), 50)}</div>` +
        `<div class="graph"><div class="label">rollbacks per report</div>${spark(keys.map(k => ({values: s.history[k].rollbacks})), 4)}</div></div>` +
        `<div class="legend">${legend}</div></div>`;
    }).join("");
  const events = data.events || [];
  document.getElementById("events").innerHTML = events.length === 0 ? `<div class="empty">No events yet.</div>` :
    events.map(e => `<div class="ev sev-${esc(e.severity)}"><span class="t">${new Date(e.timestamp_unix_ms).toLocaleTimeString()}</span> ` +
      `<span class="topic">${esc(e.topic)}</span> ${esc(e.instance)}: ${esc(e.message)}</div>`).join("");
}
try { render(JSON.parse(document.getElementById("initial").textContent)); } catch (e) { console.error(e); }
async function refresh() {
  try {
    const response = await fetch("/api/overview", {cache: "no-store"});
    if (response.ok) render(await response.json());
  } catch (e) { document.getElementById("meta").textContent = "telemetry unreachable: " + e; }
}
setInterval(refresh, 1000);
</script>
</body>
</html>
"""#
}
