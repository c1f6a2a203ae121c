/* The site's Plotly charts. Every <div data-figure="id"> is drawn from the figure JSON in
   <script id="id" type="application/json"> (boincweb/figures.py), or from the JSON object a
   <div data-figures-src="url"> loads after the page (the lab's comparison: each run's charts at
   once, while the page is already shown), keyed by id, when the page loads and after each htmx
   swap: the charts on screen first, as soon as the browser has laid the page out
   (IntersectionObserver), then the others one at a time while the browser is idle, or at once
   when the reader scrolls to one. A page of six charts thus shows its first screen without
   waiting for the charts below it. A div whose JSON a poll replaced is drawn again in place,
   keeping the reader's zoom; a chart a swap took off the page is freed. Each drawing ends with
   a "figure-drawn" event on its div, which the lab's time cursor (lab.js) listens for. A point
   whose customdata is a link of the site opens it when clicked. */
(function () {
  "use strict";
  var FIGURES = "[data-figure]";
  var charts = [];  // divs on the page that have figure JSON, drawn or waiting
  var observer = null;
  var laidOut = false;  // the observer has said once which charts are on screen
  var idleScheduled = false;
  var loaded = {};  // id -> {figure: its object} from the JSON of a data-figures-src
  var requested = {};  // the data-figures-src URLs fetched or being fetched
  var webgl = (function () {
    try { var c = document.createElement("canvas"); return !!(c.getContext("webgl") || c.getContext("experimental-webgl")); }
    catch (e) { return false; }
  })();

  // without WebGL (old machines, some remote desktops) draw the same traces as SVG
  function fallback(traces) {
    if (webgl) return traces;
    return traces.map(function (t) { return t.type === "scattergl" ? Object.assign({}, t, {type: "scatter"}) : t; });
  }

  function render(div) {
    if (!div.figureWaiting) return;
    div.figureWaiting = false;
    var fig = div.figureSource.figure || JSON.parse(div.figureSource.textContent);
    var layout = Object.assign({}, fig.layout, {uirevision: div.dataset.figure});
    Plotly.react(div, fallback(fig.data || []), layout, {displaylogo: false, responsive: true});
    if (!div.opensLinks) {
      // a point whose customdata is a link of the site (an engine host's time slice and
      // the result it computed) opens it when clicked
      div.opensLinks = true;
      div.on("plotly_click", function (event) {
        var link = event.points && event.points[0] && event.points[0].customdata;
        if (typeof link === "string" && link.charAt(0) === "/") window.location.assign(link);
      });
    }
    div.dispatchEvent(new CustomEvent("figure-drawn", {bubbles: true}));
  }

  // the charts off screen, one per idle moment, once those on screen are drawn
  function drawWhenIdle() {
    if (idleScheduled || !laidOut) return;
    idleScheduled = true;
    var later = window.requestIdleCallback || function (f) { return window.setTimeout(f, 50); };
    later(function () {
      idleScheduled = false;
      for (var i = 0; i < charts.length; i++) {
        if (charts[i].figureWaiting) {
          render(charts[i]);
          drawWhenIdle();
          return;
        }
      }
    }, {timeout: 1000});
  }

  function onScreen(entries) {
    entries.forEach(function (entry) {
      entry.target.figureOnScreen = entry.isIntersecting;
      if (entry.isIntersecting) render(entry.target);
    });
    laidOut = true;
    drawWhenIdle();
  }

  // a figure's source: its <script> on the page, else what a data-figures-src brought
  function source(id) {
    return document.getElementById(id) || loaded[id] || null;
  }

  // each data-figures-src on the page, fetched once; its figures drawn when they come, and a
  // "figures-loaded" event for the lab's time cursor, which reads the runs' logs among them
  function fetchFigures() {
    document.querySelectorAll("[data-figures-src]").forEach(function (el) {
      var url = el.getAttribute("data-figures-src");
      if (requested[url]) return;
      requested[url] = true;
      fetch(url, {credentials: "same-origin"}).then(function (response) {
        if (!response.ok) throw new Error(url + ": " + response.status);
        return response.json();
      }).then(function (figures) {
        Object.keys(figures).forEach(function (id) { loaded[id] = {figure: figures[id]}; });
        draw();
        document.dispatchEvent(new CustomEvent("figures-loaded", {detail: {url: url}}));
      }).catch(function (error) {
        requested[url] = false;  // the next swap or load tries again
        if (window.console) console.error("charts not loaded:", error);
      });
    });
  }

  function draw() {
    fetchFigures();
    charts = charts.filter(function (div) {
      if (document.body.contains(div)) return true;
      if (observer) observer.unobserve(div);
      Plotly.purge(div);
      return false;
    });
    document.querySelectorAll(FIGURES).forEach(function (div) {
      var found = source(div.dataset.figure);
      if (!found || div.figureSource === found) return;
      div.figureSource = found;
      div.figureWaiting = true;
      if (charts.indexOf(div) < 0) {
        charts.push(div);
        if (observer) observer.observe(div);  // its first report draws it if on screen
      }
      if (!observer || div.figureOnScreen) render(div);
    });
    drawWhenIdle();
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (window.IntersectionObserver) observer = new IntersectionObserver(onScreen);
    else laidOut = true;
    draw();
    document.body.addEventListener("htmx:afterSettle", draw);
    // start loading a swapped-in page's figures before htmx settles it
    document.body.addEventListener("htmx:afterSwap", fetchFigures);
  });
  window.boincwebFigures = {source: source};
})();
