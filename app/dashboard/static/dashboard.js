/* Sundial dashboard: charts (uPlot) and live refresh. No build step, no framework.
 * A page that wants live data names its JSON endpoint in <body data-live="...">; this script
 * fetches it now and every REFRESH_MS, redraws the charts and updates the numbers in place. */
(function () {
  "use strict";

  var REFRESH_MS = 5000;
  var COLORS = {
    enqueued: "#3b82f6", completed: "#10b981", errored: "#ef4444", canceled: "#a8a29e",
    p50: "#6366f1", p95: "#f59e0b"
  };
  var charts = {};

  function number(n) {
    if (n === null || n === undefined) return "\u2014";
    return Number(n).toLocaleString("en-US").replace(/,/g, "\u2009");
  }

  function duration(s) {
    if (s === null || s === undefined) return "\u2014";
    if (s === 0) return "0 s";
    if (s < 0) return "-" + duration(-s);
    if (s < 1) return Math.round(s * 1000) + " ms";
    if (s < 10) return s.toFixed(1) + " s";
    if (s < 60) return Math.round(s) + " s";
    var m = Math.floor(s / 60), sec = Math.floor(s % 60);
    if (m < 10) return m + " min " + String(sec).padStart(2, "0") + " s";
    if (m < 60) return m + " min";
    var h = Math.floor(m / 60); m = m % 60;
    if (h < 48) return h + " h " + String(m).padStart(2, "0") + " min";
    return Math.floor(h / 24) + " d " + (h % 24) + " h";
  }

  function times(series) {
    var xs = [];
    var n = (series.enqueued || series.count).length;
    for (var i = 0; i < n; i++) xs.push(series.start + i * series.step);
    return xs;
  }

  function compact(s) {
    if (s === 0) return "0";
    if (s < 1) return Math.round(s * 1000) + "ms";
    if (s < 120) return Math.round(s) + "s";
    if (s < 7200) return Math.round(s / 60) + "m";
    return Math.round(s / 3600) + "h";
  }
  function clock(ts) {
    var d = new Date(ts * 1000);
    return String(d.getHours()).padStart(2, "0") + ":" + String(d.getMinutes()).padStart(2, "0");
  }
  function axisDuration(u, vals) { return vals.map(function (v) { return v === null ? "" : compact(v); }); }
  function axisTime(u, vals) { return vals.map(clock); }
  function axisCount(u, vals) { return vals.map(function (v) { return number(v); }); }

  function line(label, color, fill) {
    return {
      label: label, stroke: color, width: 2, fill: fill ? color + "1f" : undefined,
      points: { show: false }, spanGaps: false,
      value: function (u, v) { return v === null ? "\u2014" : number(v); }
    };
  }

  function makeChart(el, kind) {
    var series, yAxis;
    if (kind === "wait") {
      series = [{}, line("p50", COLORS.p50, true), line("p95", COLORS.p95, false)];
      series.slice(1).forEach(function (s) {
        s.value = function (u, v) { return duration(v); };
        s.points = { show: true, size: 5, fill: s.stroke };  // minutes without leases are gaps
      });
      yAxis = { values: axisDuration, size: 64, grid: { stroke: "#eef1f6" }, stroke: "#6b7689" };
    } else {
      series = [{}, line("enqueued", COLORS.enqueued, true), line("completed", COLORS.completed, true),
                line("errored", COLORS.errored, false)];
      yAxis = { values: axisCount, size: 56, grid: { stroke: "#eef1f6" }, stroke: "#6b7689" };
    }
    var opts = {
      width: Math.max(el.clientWidth, 200), height: el.clientHeight - 34,
      series: series,
      scales: { x: { time: true }, y: { range: function (u, min, max) { return [0, Math.max(max, kind === "wait" ? 1 : 5) * 1.1]; } } },
      axes: [{ values: axisTime, space: 60, grid: { show: false }, stroke: "#6b7689", ticks: { stroke: "#e3e8f0" } }, yAxis],
      cursor: { points: { size: 6 } },
      legend: { live: true }
    };
    var empty = series.map(function () { return []; });
    var chart = new uPlot(opts, empty, el);
    if (window.ResizeObserver) {
      new ResizeObserver(function () {
        chart.setSize({ width: Math.max(el.clientWidth, 200), height: el.clientHeight - 34 });
      }).observe(el);
    }
    return chart;
  }

  function draw(kind, data) {
    var chart = charts[kind];
    if (!chart || !data) return;
    var xs = times(data);
    if (kind === "wait") chart.setData([xs, data.p50, data.p95]);
    else chart.setData([xs, data.enqueued, data.completed, data.errored]);
  }

  function setText(el, text) { if (el && el.textContent !== text) el.textContent = text; }

  function byKey(selector, key) {
    return document.querySelectorAll(selector.replace("KEY", CSS.escape(key)));
  }

  function updateQueueRow(q) {
    Object.keys(q.counts).forEach(function (state) {
      byKey('[data-q="KEY"][data-count="' + state + '"]', q.key).forEach(function (el) {
        setText(el, number(q.counts[state]));
        if (state === "errored") el.classList.toggle("bad", q.counts[state] > 0);
      });
    });
    byKey('[data-q="KEY"][data-age]', q.key).forEach(function (el) { setText(el, q.oldest_pending_age); });
    byKey('[data-q="KEY"][data-bar]', q.key).forEach(function (bar) {
      var total = 0;
      bar.querySelectorAll("[data-state]").forEach(function (seg) {
        var n = q.counts[seg.getAttribute("data-state")] || 0;
        seg.style.flexGrow = String(n);
        total += n;
      });
      var empty = bar.querySelector(".seg-empty");
      if (total === 0 && !empty) {
        empty = document.createElement("span"); empty.className = "seg seg-empty"; bar.appendChild(empty);
      } else if (total > 0 && empty) { empty.remove(); }
    });
  }

  // A pool that stopped or started answering changes which namespaces the page can show:
  // load it again. Otherwise only its figures change.
  function updatePools(pools) {
    (pools || []).forEach(function (p) {
      var row = byKey('[data-pool="KEY"]', p.name)[0];
      if (!row) return;
      if (row.getAttribute("data-available") !== String(p.available)) { location.reload(); return; }
      row.querySelectorAll("[data-pool-count]").forEach(function (el) {
        setText(el, number(p[el.getAttribute("data-pool-count")]));
      });
    });
  }

  function updateOverview(data) {
    updatePools(data.pools);
    var waiting = 0, running = 0, dead = 0;
    data.queues.forEach(function (q) {
      updateQueueRow(q);
      waiting += q.counts.pending + q.counts.invisible;
      running += q.counts.running;
      dead += q.counts.errored + q.counts.canceled;
    });
    setText(document.getElementById("stat-waiting"), number(waiting));
    setText(document.getElementById("stat-running"), number(running));
    setText(document.getElementById("stat-dead"), number(dead));
    setText(document.getElementById("stat-enqueued"), number(data.throughput.totals.enqueued));
    setText(document.getElementById("stat-completed"), number(data.throughput.totals.completed));
    draw("throughput", data.throughput);
  }

  function cell(tr, text, cls) {
    var td = document.createElement("td");
    if (cls) td.className = cls;
    td.textContent = text;
    tr.appendChild(td);
    return td;
  }

  function updateExclusive(ex) {
    var table = document.getElementById("exclusive-table");
    if (!table || !ex) return;
    setText(document.getElementById("exclusive-summary"),
      ex.running.length + " running \u00b7 " + number(ex.blocked) + " blocked among the next " +
      number(ex.scanned) + " pending");
    var body = table.tBodies[0];
    var rows = document.createDocumentFragment();
    ex.running.forEach(function (r) {
      var tr = document.createElement("tr");
      var code = document.createElement("code"); code.textContent = r.value;
      cell(tr, "").appendChild(code);
      var link = document.createElement("a");
      link.href = location.pathname.replace(/\/$/, "") + "/messages/" + encodeURIComponent(r.message_id);
      link.textContent = r.message_id;
      cell(tr, "").appendChild(link);
      cell(tr, r.running, "num"); cell(tr, r.lease_left, "num"); cell(tr, String(r.attempts), "num");
      cell(tr, number(r.blocked), "num" + (r.blocked ? " warn" : ""));
      rows.appendChild(tr);
    });
    if (!ex.running.length) {
      var tr = document.createElement("tr");
      var td = cell(tr, "No value is running.", "empty"); td.colSpan = 6;
      rows.appendChild(tr);
    }
    body.replaceChildren(rows);
  }

  function updateQueue(data) {
    var q = data.queue;
    Object.keys(q.counts).forEach(function (state) {
      document.querySelectorAll('.stats [data-count="' + state + '"]').forEach(function (el) {
        setText(el, number(q.counts[state]));
      });
    });
    document.querySelectorAll(".stats [data-age]").forEach(function (el) { setText(el, q.oldest_pending_age); });
    draw("throughput", data.throughput);
    draw("wait", data.wait_times);
    updateExclusive(data.exclusive);
  }

  function refresh(url, page) {
    if (document.visibilityState === "hidden") return Promise.resolve();
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (response.status === 401) { location.reload(); return null; }
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      })
      .then(function (data) {
        if (!data) return;
        if (page === "overview") updateOverview(data); else updateQueue(data);
        var live = document.querySelector(".live");
        if (live) live.classList.remove("stale");
        setText(document.getElementById("live-status"), "live \u00b7 every 5 s");
        document.body.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function () {
        var live = document.querySelector(".live");
        if (live) live.classList.add("stale");
        setText(document.getElementById("live-status"), "reconnecting\u2026");
      });
  }

  function selectAll() {
    var all = document.getElementById("select-all");
    if (!all) return;
    all.addEventListener("change", function () {
      document.querySelectorAll(".row-check").forEach(function (box) { box.checked = all.checked; });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    selectAll();
    var url = document.body.getAttribute("data-live");
    if (!url) return;
    document.querySelectorAll("[data-chart]").forEach(function (el) {
      if (window.uPlot) charts[el.getAttribute("data-chart")] = makeChart(el, el.getAttribute("data-chart"));
    });
    var page = document.body.getAttribute("data-page");
    refresh(url, page);
    setInterval(function () { refresh(url, page); }, REFRESH_MS);
    // Back on the tab: fresh numbers now, not at the next tick.
    document.addEventListener("visibilitychange", function () { refresh(url, page); });
  });
})();
