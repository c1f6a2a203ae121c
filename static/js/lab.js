/* The scheduling lab's time cursor: moves one cursor over simulated time across every chart
   of a run page or a comparison (charts.js draws them), keeps their zoom together, and shows
   each run's decision log at the cursor. A run's log and length come in
   <script id="run-<id>-log"> beside its figures, or with the figures a comparison page loads
   after it (scheduling/views.py, chart_data; charts.js's boincwebFigures.source). */
(function () {
  "use strict";
  var runs = {};        // run id -> {source: its log's <script>, decisions: [[t_h, kind, project, job, text], ...]}
  var charts = [];      // the lab's chart divs drawn
  var cursor = {t: 0, max: 0, timer: null, speed: 2};
  var syncing = false;

  // a chart charts.js drew: a poll of a running run swaps in new ones, so forget those it replaced
  function addChart(div) {
    charts = charts.filter(function (d) { return d !== div && document.body.contains(d); });
    charts.push(div);
    div.on("plotly_relayout", function (ev) { syncZoom(div, ev); });
    div.on("plotly_click", function (ev) {
      if (ev.points && ev.points.length) setTime(ev.points[0].x);
    });
  }

  // the logs of the runs on the page, read again when a poll brings a new one
  function readRuns() {
    document.querySelectorAll("[data-run-id]").forEach(function (el) {
      var id = el.getAttribute("data-run-id");
      var source = window.boincwebFigures.source("run-" + id + "-log");
      if (!source || (runs[id] && runs[id].source === source)) return;
      var log = source.figure || JSON.parse(source.textContent);
      runs[id] = {source: source, decisions: log.decisions, label: log.run.label};
      cursor.max = Math.max(cursor.max, log.run.duration_h);
    });
    var range = document.querySelector('[data-cursor="range"]');
    if (range && !range.hasAttribute("data-bound")) bindControls(range);
    if (range) range.max = cursor.max;  // a comparison's logs come after its page
    renderLogs();
  }

  // charts of one page share one time axis: zooming one zooms all
  function syncZoom(source, ev) {
    if (syncing) return;
    var update = null;
    if (ev["xaxis.range[0]"] !== undefined) update = {"xaxis.range": [ev["xaxis.range[0]"], ev["xaxis.range[1]"]]};
    else if (ev["xaxis.autorange"]) update = {"xaxis.range": [0, cursor.max]};
    if (!update) return;
    syncing = true;
    var pending = charts.filter(function (d) { return d !== source; }).map(function (d) { return Plotly.relayout(d, update); });
    Promise.all(pending).then(function () { syncing = false; }, function () { syncing = false; });
  }

  // hours of simulated time as the run's clock, "day 1, 13:08" (boincweb/human.py sim_time)
  function clock(h) {
    var minutes = Math.max(0, Math.floor(h * 60 + 1e-6));
    var day = Math.floor(minutes / 1440), rest = minutes % 1440;
    var hh = Math.floor(rest / 60), mm = rest % 60;
    return "day " + (day + 1) + ", " + (hh < 10 ? "0" : "") + hh + ":" + (mm < 10 ? "0" : "") + mm;
  }

  function allTimes() {
    var times = [];
    Object.keys(runs).forEach(function (id) { runs[id].decisions.forEach(function (d) { times.push(d[0]); }); });
    times.sort(function (a, b) { return a - b; });
    return times;
  }

  function setTime(t) {
    cursor.t = Math.max(0, Math.min(cursor.max, t));
    var range = document.querySelector('[data-cursor="range"]');
    if (range) range.value = cursor.t;
    var out = document.querySelector('[data-cursor="time"]');
    if (out) out.textContent = clock(cursor.t);
    charts.forEach(function (div) {
      Plotly.relayout(div, {"shapes[0].x0": cursor.t, "shapes[0].x1": cursor.t});
    });
    renderLogs();
  }

  // the index of the last decision at or before t (binary search on sorted times)
  function lastBefore(decisions, t) {
    var lo = 0, hi = decisions.length;
    while (lo < hi) {
      var mid = (lo + hi) >> 1;
      if (decisions[mid][0] <= t + 1e-9) lo = mid + 1; else hi = mid;
    }
    return lo - 1;
  }

  function renderLogs() {
    document.querySelectorAll("ol.decision-log").forEach(function (ol) {
      var run = runs[ol.getAttribute("data-run-id")];
      if (!run) return;
      var n = ol.classList.contains("short") ? 6 : 14;
      var end = lastBefore(run.decisions, cursor.t);
      ol.innerHTML = "";
      if (end < 0) {
        var li = document.createElement("li");
        li.className = "empty";
        li.textContent = "Nothing decided yet at " + clock(cursor.t) + ". Press play or step.";
        ol.appendChild(li);
        return;
      }
      var now = run.decisions[end][0];
      for (var i = Math.max(0, end - n + 1); i <= end; i++) {
        var d = run.decisions[i];
        var item = document.createElement("li");
        item.className = "kind-" + d[1] + (d[0] === now ? " now" : "");
        var time = document.createElement("time");
        time.textContent = clock(d[0]);
        var kind = document.createElement("b");
        kind.textContent = d[1];
        item.appendChild(time);
        item.appendChild(kind);
        item.appendChild(document.createTextNode(" " + d[4]));
        ol.appendChild(item);
      }
      ol.scrollTop = ol.scrollHeight;
    });
  }

  function step(direction) {
    var times = allTimes();
    var t = cursor.t, next = null;
    if (direction > 0) {
      for (var i = 0; i < times.length; i++) if (times[i] > t + 1e-9) { next = times[i]; break; }
    } else {
      for (var j = times.length - 1; j >= 0; j--) if (times[j] < t - 1e-9) { next = times[j]; break; }
    }
    setTime(next === null ? (direction > 0 ? cursor.max : 0) : next);
  }

  function play(button) {
    if (cursor.timer) {
      clearInterval(cursor.timer);
      cursor.timer = null;
      button.textContent = "▶ play";
      return;
    }
    if (cursor.t >= cursor.max) setTime(0);
    button.textContent = "❚❚ pause";
    cursor.timer = setInterval(function () {
      setTime(cursor.t + cursor.speed / 10);
      if (cursor.t >= cursor.max) play(button);
    }, 100);
  }

  function bindControls(range) {
    range.setAttribute("data-bound", "1");
    range.max = cursor.max;
    range.addEventListener("input", function () { setTime(parseFloat(range.value)); });
    document.querySelectorAll("[data-cursor]").forEach(function (el) {
      var what = el.getAttribute("data-cursor");
      if (what === "back") el.addEventListener("click", function () { step(-1); });
      if (what === "forward") el.addEventListener("click", function () { step(1); });
      if (what === "play") el.addEventListener("click", function () { play(el); });
      if (what === "speed") {
        cursor.speed = parseFloat(el.value);
        el.addEventListener("change", function () { cursor.speed = parseFloat(el.value); });
      }
    });
    document.addEventListener("keydown", function (ev) {
      if (ev.target.closest && ev.target.closest("input, select, textarea")) return;
      if (ev.key === "ArrowRight") step(1);
      if (ev.key === "ArrowLeft") step(-1);
    });
  }

  window.boincwebLab = {setTime: setTime, step: step, time: function () { return cursor.t; }};
  document.addEventListener("figure-drawn", function (ev) {
    if (ev.target.classList.contains("lab-chart") && charts.indexOf(ev.target) < 0) addChart(ev.target);
  });
  document.addEventListener("DOMContentLoaded", function () {
    readRuns();
    document.body.addEventListener("htmx:afterSettle", readRuns);
    document.addEventListener("figures-loaded", readRuns);
  });
})();
