/* The scheduling lab's charts: draws the Plotly figures a run page embeds, moves one cursor
   over simulated time across every chart, and shows the decision log at the cursor. */
(function () {
  "use strict";
  var runs = {};        // run id -> {decisions: [[t_h, kind, project, job, text], ...]}
  var charts = [];      // chart divs drawn
  var cursor = {t: 0, max: 0, timer: null, speed: 2};
  var syncing = false;
  var webgl = (function () {
    try { var c = document.createElement("canvas"); return !!(c.getContext("webgl") || c.getContext("experimental-webgl")); }
    catch (e) { return false; }
  })();

  // without WebGL (old machines, some remote desktops) draw the same traces as SVG
  function fallback(traces) {
    if (webgl) return traces;
    return traces.map(function (t) { return t.type === "scattergl" ? Object.assign({}, t, {type: "scatter"}) : t; });
  }

  function drawAll(root) {
    // a poll of a running run swaps in new charts: forget (and free) the ones it replaced
    charts = charts.filter(function (div) {
      if (document.body.contains(div)) return true;
      Plotly.purge(div);
      return false;
    });
    root.querySelectorAll("script.lab-data:not([data-drawn])").forEach(function (el) {
      el.setAttribute("data-drawn", "1");
      var data = JSON.parse(el.textContent);
      var id = el.getAttribute("data-run-id");
      runs[id] = {decisions: data.decisions, label: data.run.label};
      cursor.max = Math.max(cursor.max, data.run.duration_h);
      document.querySelectorAll('.lab-chart[data-run-id="' + id + '"]').forEach(function (div) {
        var fig = data.figures[div.getAttribute("data-chart")];
        if (!fig) return;
        Plotly.newPlot(div, fallback(fig.data), fig.layout, {responsive: true, displaylogo: false});
        div.setAttribute("data-drawn", "1");
        charts.push(div);
        div.on("plotly_relayout", function (ev) { syncZoom(div, ev); });
        div.on("plotly_click", function (ev) {
          if (ev.points && ev.points.length) setTime(ev.points[0].x);
        });
      });
    });
    var range = document.querySelector('[data-cursor="range"]');
    if (range && !range.hasAttribute("data-bound")) bindControls(range);
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
    if (out) out.textContent = cursor.t.toFixed(2) + " h";
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
        li.textContent = "Nothing decided yet at " + cursor.t.toFixed(2) + " h. Press play or step.";
        ol.appendChild(li);
        return;
      }
      var now = run.decisions[end][0];
      for (var i = Math.max(0, end - n + 1); i <= end; i++) {
        var d = run.decisions[i];
        var item = document.createElement("li");
        item.className = "kind-" + d[1] + (d[0] === now ? " now" : "");
        var time = document.createElement("time");
        time.textContent = d[0].toFixed(2) + " h";
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
  // a run's charts arrive in the fragments a poll swaps in, growing while it runs and whole
  // at the end; drawAll skips what it drew
  document.addEventListener("DOMContentLoaded", function () {
    drawAll(document);
    document.body.addEventListener("htmx:afterSettle", function () { drawAll(document); });
  });
})();
