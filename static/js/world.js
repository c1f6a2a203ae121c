// The world pages' charts: each <div data-world-figure="id"> is drawn from the JSON in
// <script id="id">, and redrawn in place (zoom kept) each time htmx swaps in fresh JSON.
(function () {
  function draw() {
    document.querySelectorAll("[data-world-figure]").forEach(function (div) {
      var source = document.getElementById(div.dataset.worldFigure);
      if (!source) return;
      var fig = JSON.parse(source.textContent);
      fig.layout.uirevision = div.dataset.worldFigure;
      Plotly.react(div, fig.data, fig.layout, {displaylogo: false, responsive: true});
    });
  }
  document.addEventListener("DOMContentLoaded", draw);
  document.addEventListener("htmx:afterSwap", draw);
})();
