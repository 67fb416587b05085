// Aerolite console: live figures and charts from the server-sent events at /events.
// Elements opt in by attribute, so pages need no script of their own (the CSP forbids it):
//   data-live="KEY"          its text is replaced by the sample's live[KEY]
//   data-heatmap             a table whose [data-live] cells are shaded by value (heat0..heat9)
//   data-chart="K1 K2 ..."   a uPlot chart of series K (in.B:0, out.B:0, lag.GROUP), with
//                            data-labels="L1|L2|..." and data-title="..."
//   data-live-status         shows when the last sample came, or the sampler's error
(function () {
  "use strict";
  var charts = [];
  var source = null;
  var palette = ["#2f6fde", "#e0672f", "#2a9d5c", "#b03fb0", "#c9a227", "#5a5a5a", "#19a3b3"];

  function shade(table) {
    var cells = table.querySelectorAll("[data-live]");
    var values = [];
    var top = 0;
    cells.forEach(function (c) {
      var v = parseFloat((c.textContent || "0").replace(/,/g, "")) || 0;
      values.push(v);
      if (v > top) top = v;
    });
    cells.forEach(function (c, i) {
      var level = top > 0 ? Math.min(9, Math.ceil((values[i] / top) * 9)) : 0;
      for (var k = 0; k < 10; k++) c.classList.remove("heat" + k);
      c.classList.add("heat" + level);
    });
  }

  function makeChart(el) {
    var keys = el.getAttribute("data-chart").split(" ").filter(Boolean);
    var labels = (el.getAttribute("data-labels") || "").split("|");
    var width = Math.max(320, el.clientWidth || 600);
    var series = [{}];
    keys.forEach(function (k, i) {
      series.push({ label: labels[i] || k, stroke: palette[i % palette.length], width: 2 });
    });
    var chart = {
      el: el, keys: keys, xs: [], ys: keys.map(function () { return []; }), plot: null,
    };
    chart.plot = new uPlot(
      { title: el.getAttribute("data-title") || "", width: width, height: 220, series: series,
        axes: [{}, { size: 70 }], scales: { x: { time: true } } },
      [[]].concat(keys.map(function () { return []; })), el);
    charts.push(chart);
    var url = "/api/series?" + keys.map(function (k) { return "key=" + encodeURIComponent(k); }).join("&");
    fetch(url, { credentials: "same-origin" }).then(function (r) { return r.json(); }).then(function (data) {
      var stamps = {};
      keys.forEach(function (k) { (data[k] || [[], []])[0].forEach(function (t) { stamps[t] = 1; }); });
      chart.xs = Object.keys(stamps).map(Number).sort(function (a, b) { return a - b; });
      chart.ys = keys.map(function (k) {
        var col = data[k] || [[], []];
        var at = {};
        col[0].forEach(function (t, i) { at[t] = col[1][i]; });
        return chart.xs.map(function (t) { return t in at ? at[t] : null; });
      });
      chart.plot.setData([chart.xs].concat(chart.ys));
    });
  }

  function addPoints(points) {
    charts.forEach(function (chart) {
      var ts = null;
      chart.keys.forEach(function (k) { if (points[k]) ts = points[k][0]; });
      if (ts === null || (chart.xs.length && chart.xs[chart.xs.length - 1] >= ts)) return;
      chart.xs.push(ts);
      chart.keys.forEach(function (k, i) { chart.ys[i].push(points[k] ? points[k][1] : null); });
      var limit = 720;
      if (chart.xs.length > limit) {
        chart.xs.shift();
        chart.ys.forEach(function (y) { y.shift(); });
      }
      chart.plot.setData([chart.xs].concat(chart.ys));
    });
  }

  function onSample(event) {
    var sample = JSON.parse(event.data);
    document.querySelectorAll("[data-live]").forEach(function (el) {
      var key = el.getAttribute("data-live");
      if (key in sample.live) el.textContent = sample.live[key];
    });
    document.querySelectorAll("[data-heatmap]").forEach(shade);
    addPoints(sample.points || {});
    document.querySelectorAll("[data-live-status]").forEach(function (el) {
      if (sample.error) {
        el.textContent = sample.error;
        el.classList.add("stale");
      } else {
        var when = new Date(sample.sampledAt * 1000);
        el.textContent = "live · sampled " + when.toLocaleTimeString();
        el.classList.remove("stale");
      }
    });
  }

  function start() {
    document.querySelectorAll("[data-chart]").forEach(makeChart);
    document.querySelectorAll("[data-heatmap]").forEach(shade);
    var live = document.querySelector("[data-live], [data-chart], [data-live-status]");
    if (live && !source && window.EventSource) {
      source = new EventSource("/events");
      source.addEventListener("sample", onSample);
      source.onerror = function () {
        document.querySelectorAll("[data-live-status]").forEach(function (el) {
          el.textContent = "reconnecting to the console…";
          el.classList.add("stale");
        });
      };
    }
    window.addEventListener("resize", function () {
      charts.forEach(function (c) { c.plot.setSize({ width: Math.max(320, c.el.clientWidth), height: 220 }); });
    });
  }

  // a confirmation for forms that destroy something: <form data-confirm="Delete topic X?">
  document.addEventListener("submit", function (e) {
    var form = e.target;
    var question = form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) e.preventDefault();
  }, true);
  document.addEventListener("htmx:confirm", function (e) {
    var question = e.target.getAttribute("data-confirm");
    if (question && !window.confirm(question)) e.preventDefault();
  });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
