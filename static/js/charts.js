/* The site's Plotly charts. Every <div data-figure="id"> is drawn from the figure JSON in
   <script id="id" type="application/json"> (boincweb/figures.py) when the page loads and after
   each htmx swap. A div whose JSON a poll replaced is drawn again in place, keeping the
   reader's zoom; a chart a swap took off the page is freed. Each drawing ends with a
   "figure-drawn" event on its div, which the lab's time cursor (lab.js) listens for. A point
   whose customdata is a link of the site opens it when clicked. */
(function () {
  "use strict";
  var FIGURES = "[data-figure]";
  var drawn = [];  // divs drawn so far
  var webgl = (function () {
    try { var c = document.createElement("canvas"); return !!(c.getContext("webgl") || c.getContext("experimental-webgl")); }
    catch (e) { return false; }
  })();

  // without WebGL (old machines, some remote desktops) draw the same traces as SVG
  function fallback(traces) {
    if (webgl) return traces;
    return traces.map(function (t) { return t.type === "scattergl" ? Object.assign({}, t, {type: "scatter"}) : t; });
  }

  function draw() {
    drawn = drawn.filter(function (div) {
      if (document.body.contains(div)) return true;
      Plotly.purge(div);
      return false;
    });
    document.querySelectorAll(FIGURES).forEach(function (div) {
      var id = div.dataset.figure;
      var source = document.getElementById(id);
      if (!source || div.figureSource === source) return;
      if (!div.figureSource) drawn.push(div);
      div.figureSource = source;
      var fig = JSON.parse(source.textContent);
      var layout = Object.assign({}, fig.layout, {uirevision: id});
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
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    draw();
    document.body.addEventListener("htmx:afterSettle", draw);
  });
})();
