/* The pages' behaviour without inline scripts or handlers, so that the Content Security Policy can forbid both:
 *  - <div data-figure="ID"> draws the Plotly figure in the JSON script element ID (data-figure-index="N": the Nth
 *    figure of a list), also when htmx brings it in later (the run page's results once the run has ended); when
 *    Plotly is not on the page yet, the closest data-plotly="URL" says where to load it from;
 *  - <select data-autosubmit> submits its form when it changes;
 *  - <form data-confirm="TEXT"> asks TEXT before it is sent. */
(function () {
  "use strict";
  var plotlyLoading = false;
  function loadPlotly(url) {
    if (plotlyLoading) return;
    plotlyLoading = true;
    var script = document.createElement("script");
    script.src = url;
    script.addEventListener("load", drawFigures);
    document.head.appendChild(script);
  }
  function drawFigures() {
    var pending = Array.prototype.filter.call(document.querySelectorAll("[data-figure]"), function (element) {
      return !element.dataset.drawn;
    });
    if (!pending.length) return;
    if (typeof Plotly === "undefined") {
      var source = pending[0].closest("[data-plotly]");
      if (source) loadPlotly(source.dataset.plotly);
      return;
    }
    pending.forEach(function (element) {
      var source = document.getElementById(element.dataset.figure);
      if (!source) return;
      var figure = JSON.parse(source.textContent);
      if (element.dataset.figureIndex !== undefined) figure = figure[Number(element.dataset.figureIndex)];
      if (!figure) return;
      element.dataset.drawn = "true";
      Plotly.newPlot(element, figure.data, figure.layout, {responsive: true, displaylogo: false});
    });
  }
  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target.matches && target.matches("select[data-autosubmit]") && target.form) target.form.submit();
  });
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.dataset && form.dataset.confirm && !window.confirm(form.dataset.confirm)) event.preventDefault();
  }, true);
  document.addEventListener("htmx:afterSettle", drawFigures);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", drawFigures);
  else drawFigures();
})();
