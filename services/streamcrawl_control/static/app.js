// The streamcrawl dashboard: plain JavaScript over the control plane's /v1 API (no build step, no CDN).
// The API token is kept in this tab's sessionStorage; a link may carry it as #token=... (a fragment is
// never sent to a server, so it lands in no access log).
"use strict";
const Dashboard = (() => {
  const $ = (sel) => document.querySelector(sel);
  const POLL_MS = 2000;
  const POINTS = 150;
  const series = [];

  function token() {
    const m = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
    if (m) {
      sessionStorage.setItem("streamcrawl-token", decodeURIComponent(m[1]));
      history.replaceState(null, "", location.pathname + location.search);
    }
    return sessionStorage.getItem("streamcrawl-token") || "";
  }

  function bindToken() {
    const input = $("#token");
    input.value = token();
    input.addEventListener("change", () => sessionStorage.setItem("streamcrawl-token", input.value.trim()));
  }

  async function api(method, path, body) {
    const headers = { "Accept": "application/json" };
    const t = token();
    if (t) headers["Authorization"] = "Bearer " + t;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const r = await fetch("/v1" + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const data = r.status === 204 ? null : await r.json().catch(() => null);
    if (!r.ok && !(r.status === 422 && data && data.results)) {
      throw new Error((data && data.detail) || (r.status + " " + r.statusText));
    }
    return data;
  }

  function showError(err) {
    const el = $("#error");
    el.hidden = !err;
    el.textContent = err ? String(err.message || err) : "";
  }

  const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  const num = (n, d = 0) => (n === null || n === undefined) ? "–" : Number(n).toLocaleString("en", { maximumFractionDigits: d });
  const bytes = (n) => n > 1e9 ? num(n / 1e9, 2) + " GB" : n > 1e6 ? num(n / 1e6, 1) + " MB" : num(n / 1e3, 1) + " kB";
  const hostLink = (h) => `<a class="host-link" href="host.html?host=${encodeURIComponent(h)}">${esc(h)}</a>`;

  function rows(sel, entries) {
    $(sel + " tbody").innerHTML = entries.map(([k, v]) => `<tr><td>${k}</td><td class="n">${v}</td></tr>`).join("")
      || `<tr><td colspan="2" class="note">none</td></tr>`;
  }

  function chart() {
    const svg = $("#chart");
    const max = Math.max(1, ...series.map((p) => p.v));
    const w = 600, h = 160;
    const pts = series.map((p, i) => `${(i / (POINTS - 1)) * w},${h - (p.v / max) * (h - 10)}`).join(" ");
    svg.innerHTML = `<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="${pts}"/>`
      + `<text x="4" y="12" font-size="11" fill="#667">${num(max, 1)} pages/s</text>`;
  }

  let last = null;
  function render(s) {
    // Current rate: fetched pages between two polls (the API's m1/m5 are minute averages).
    const now = Date.parse(s.at) / 1000;
    let current = s.pages_per_s.m1;
    if (last && now > last.t) current = Math.max(0, (s.pages_fetched - last.pages) / (now - last.t));
    if (!last || now > last.t) {
      last = { t: now, pages: s.pages_fetched };
      series.push({ t: now, v: current || 0 });
      while (series.length > POINTS) series.shift();
    }
    chart();
    $("#rate-now").textContent = `${num(current, 1)} pages/s now · ${num(s.pages_per_s.m1, 1)} (1 min) · ${num(s.pages_per_s.m5, 1)} (5 min)`;
    const t = [
      ["pages fetched", num(s.pages_fetched)], ["published", num(s.pages_published)], ["bytes", bytes(s.bytes_fetched)],
      ["queued", num(s.frontier.queued)], ["in flight", num(s.frontier.in_flight)], ["hosts", num(s.frontier.hosts)],
      ["fetch p50 / p99", `${num(s.fetch_seconds_p50, 3)} / ${num(s.fetch_seconds_p99, 3)} s`],
      ["DNS hit rate", s.dns_cache_hit_rate === null ? "–" : num(100 * s.dns_cache_hit_rate, 1) + " %"],
      ["seen set", num(s.seen_set_size)], ["duplicates", num(s.duplicates)], ["traps stopped", num(s.traps_stopped)],
      ["dead letters", num(s.dead_letters)], ["recrawl backlog", num(s.recrawl_backlog)],
    ];
    $("#totals").innerHTML = t.map(([k, v]) => `<div><b>${v}</b>${k}</div>`).join("");
    rows("#outcomes", Object.entries(s.outcomes).map(([k, v]) => [esc(k), num(v)]));
    rows("#errors", Object.entries(s.errors).map(([k, v]) => [esc(k), num(v)]));
    rows("#lag", Object.entries(s.lag).map(([k, v]) => [esc(k), num(v)]));
    $("#hosts tbody").innerHTML = s.top_hosts.map((h) => `<tr><td>${hostLink(h.host)}</td><td class="n">${num(h.queued)}</td></tr>`).join("")
      || `<tr><td colspan="2" class="note">nothing queued</td></tr>`;
    const state = $("#state");
    state.textContent = s.frontier.paused_all ? "paused" : "crawling";
    state.className = "pill " + (s.frontier.paused_all ? "paused" : "ok");
  }

  async function refreshPauses() {
    const p = await api("GET", "/pauses");
    $("#pause-state").textContent = p.all ? "paused" : "running";
    $("#applied-within").textContent = p.applied_within_s;
    $("#paused-hosts").innerHTML = p.hosts.map((e) => `<li>${hostLink(e.scope)} paused</li>`).join("");
  }

  async function refreshBlocklist() {
    const b = await api("GET", "/blocklist");
    $("#blocklist").innerHTML = b.patterns.map((e) => `<li><code>${esc(e.pattern)}</code> `
      + `<button data-pattern="${esc(e.pattern)}" class="unblock">remove</button></li>`).join("");
  }

  async function poll() {
    try {
      render(await api("GET", "/stats"));
      await refreshPauses();
      showError(null);
    } catch (err) {
      showError(err);
      $("#state").textContent = "error";
      $("#state").className = "pill bad";
    }
    setTimeout(poll, POLL_MS);
  }

  function on(sel, event, fn) {
    $(sel).addEventListener(event, async (ev) => {
      ev.preventDefault();
      try { await fn(ev); showError(null); } catch (err) { showError(err); }
    });
  }

  function main() {
    bindToken();
    on("#seed-form", "submit", async () => {
      const urls = $("#seed-urls").value.split(/\s+/).filter(Boolean);
      const r = await api("POST", "/seeds", { urls });
      $("#seed-result").innerHTML = r.results.map((x) => `<li class="${x.status}">${esc(x.url)}: ${x.status}`
        + (x.status === "accepted" ? ` (${esc(x.host)})` : ` — ${esc(x.reason)} ${esc(x.error)}`) + "</li>").join("");
    });
    on("#pause-all", "click", async () => { await api("POST", "/pause", {}); await refreshPauses(); });
    on("#resume-all", "click", async () => { await api("POST", "/resume", {}); await refreshPauses(); });
    on("#pause-form", "submit", async () => { await api("POST", "/pause", { host: $("#pause-host").value.trim() }); await refreshPauses(); });
    on("#resume-host-btn", "click", async () => { await api("POST", "/resume", { host: $("#pause-host").value.trim() }); await refreshPauses(); });
    on("#host-form", "submit", async () => { location.href = "host.html?host=" + encodeURIComponent($("#host-input").value.trim()); });
    on("#block-form", "submit", async () => { await api("PUT", "/blocklist", { patterns: [$("#block-pattern").value.trim()] }); await refreshBlocklist(); });
    on("#blocklist", "click", async (ev) => {
      const p = ev.target.dataset && ev.target.dataset.pattern;
      if (p) { await api("DELETE", "/blocklist/" + encodeURIComponent(p)); await refreshBlocklist(); }
    });
    refreshBlocklist().catch(showError);
    poll();
  }

  async function host() {
    bindToken();
    const name = new URLSearchParams(location.search).get("host") || "";
    $("#host-name").textContent = name;
    document.title = "streamcrawl · " + name;
    const load = async () => {
      try {
        const h = await api("GET", "/hosts/" + encodeURIComponent(name));
        const pill = $("#host-paused");
        pill.textContent = h.paused ? "paused" : (h.blocked_by ? "blocked by " + h.blocked_by : "active");
        pill.className = "pill " + (h.paused || h.blocked_by ? "paused" : "ok");
        const facts = [
          ["partition", h.partition], ["next allowed at", h.next_allowed_at || "now"],
          ["lease in flight", h.lease ? `${esc(h.lease.url)} (until ${h.lease.expires_at})` : "none"],
          ["back-off level", h.backoff_level],
          ["robots.txt", h.robots.status === null ? "not fetched" : `${h.robots.status} at ${h.robots.fetched_at}`],
          ["crawl-delay", h.robots.crawl_delay_s === null ? "none" : h.robots.crawl_delay_s + " s"],
          ["DNS", h.dns.ip ? `${esc(h.dns.ip)} until ${h.dns.expires_at}` : (h.dns.error ? esc(h.dns.error) : "not resolved")],
          ["last fetch", h.last_fetch_ms === null ? "–" : `${num(h.last_fetch_ms, 1)} ms, ended ${h.last_fetch_end || "?"}`],
          ["override", h.override ? esc(JSON.stringify(h.override)) : "none"],
        ];
        $("#host-facts tbody").innerHTML = facts.map(([k, v]) => `<tr><td>${k}</td><td>${v}</td></tr>`).join("");
        $("#queue-length").textContent = `${num(h.queue.length)} queued`;
        $("#queue-first").innerHTML = h.queue.first.map((q) => `<li>${esc(q.url)} <small>p${q.priority} ${esc(q.kind)}</small></li>`).join("");
        $("#host-outcomes tbody").innerHTML = h.recent_outcomes.map((o) => `<tr><td>${esc(o.at)}</td><td>${esc(o.outcome)}</td>`
          + `<td>${o.status ?? ""}</td><td class="n">${num(o.fetch_ms, 1)}</td><td>${esc(o.url)}</td></tr>`).join("");
        showError(null);
      } catch (err) { showError(err); }
    };
    on("#host-pause", "click", async () => { await api("POST", "/pause", { host: name }); await load(); });
    on("#host-resume", "click", async () => { await api("POST", "/resume", { host: name }); await load(); });
    await load();
    setInterval(load, 3000);
  }

  return { main, host };
})();
