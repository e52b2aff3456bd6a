/* The pages' behaviour without inline scripts or handlers, so that the Content Security Policy can forbid both:
 *  - <div data-figure="ID"> draws the Plotly figure in the JSON script element ID (data-figure-index="N": the Nth
 *    figure of a list);
 *  - <select data-autosubmit> submits its form when it changes;
 *  - <form data-confirm="TEXT"> asks TEXT before it is sent. */
(function () {
  "use strict";
  function drawFigures() {
    if (typeof Plotly === "undefined") return;
    document.querySelectorAll("[data-figure]").forEach(function (element) {
      var source = document.getElementById(element.dataset.figure);
      if (!source) return;
      var figure = JSON.parse(source.textContent);
      if (element.dataset.figureIndex !== undefined) figure = figure[Number(element.dataset.figureIndex)];
      if (!figure) return;
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
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", drawFigures);
  else drawFigures();
})();
