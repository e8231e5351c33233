/* pytest-mlbench's history page (written by `pytest-mlbench report --html`).
 *
 * Reads window.MLBENCH (data.js, written by pytest_mlbench/reporting/page.py) and draws, with
 * uPlot (vendored beside this file): the steps found, each machine's latest tables, and per
 * case its history in commit order on every machine that ran it, side by side. Charts are
 * made as they scroll into view, so a history of hundreds of cases opens at once.
 * window.mlbenchReady turns true once the page is built (window.mlbenchBuiltMs: when, since
 * navigation began); window.mlbenchCharts maps a series' index to its uPlot chart (the
 * browser test reads them). */
(function () {
  "use strict";
  var D = window.MLBENCH;
  var charts = {};
  window.mlbenchCharts = charts;
  if (!D || D.format !== 1) {
    return;  // index.html's text says that data.js did not load
  }
  var FILTERS = ["workload", "framework", "precision", "layout"];
  var machines = D.machines.map(function (m) { return m.id; });
  var stepsOf = {};  // series index -> its steps
  D.steps.forEach(function (st) { (stepsOf[st.s] = stepsOf[st.s] || []).push(st); });

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function runName(i) {
    var r = D.runs[i];
    var when = (r.t || r.s || "").slice(0, 10);
    return (r.c ? r.c.slice(0, 8) : r.f) + (when ? " " + when : "");
  }

  function pct(x) { return (x >= 0 ? "+" : "") + (100 * x).toFixed(1) + "%"; }

  function caseId(label) { return "case-" + label.replace(/[^A-Za-z0-9]+/g, "-"); }

  // -- the steps, at the top --------------------------------------------------------------------
  function drawSteps() {
    var table = document.getElementById("steps");
    document.getElementById("steps-note").textContent =
      D.steps.length + " step(s) in " + D.tested + " tested case(s): a case's runs in commit " +
      "order, tested by shuffling them (a history with no step lists one with probability at " +
      "most " + D.alpha + "); steps under " + (100 * D.threshold).toFixed(0) + "% not listed.";
    if (!D.steps.length) { return; }
    var head = el("tr");
    ["machine", "case", "step", "last run before", "first run after"].forEach(function (h) {
      head.appendChild(el("th", {}, h));
    });
    table.appendChild(head);
    D.steps.forEach(function (st) {
      var s = D.series[st.s];
      var tr = el("tr", {"class": st.size > 0 ? "slower" : "faster", "data-series": st.s});
      tr.appendChild(el("td", {}, machines[s.m]));
      var td = el("td");
      var link = el("a", {"href": "#" + caseId(s.label)}, s.label);
      link.addEventListener("click", function () { resetFilters(); });
      td.appendChild(link);
      tr.appendChild(td);
      tr.appendChild(el("td", {"class": "size"}, pct(st.size)));
      tr.appendChild(el("td", {}, runName(st.before) + " (" + D.runs[st.before].f + ")"));
      tr.appendChild(el("td", {}, runName(st.at) + " (" + D.runs[st.at].f + ")"));
      table.appendChild(tr);
    });
  }

  // -- selection ----------------------------------------------------------------------------------
  function fillSelects() {
    FILTERS.forEach(function (name) {
      var select = document.getElementById("f-" + name);
      var values = {};
      D.series.forEach(function (s) { values[s[name]] = true; });
      select.appendChild(el("option", {"value": ""}, "all"));
      Object.keys(values).sort().forEach(function (v) {
        select.appendChild(el("option", {"value": v}, v));
      });
      select.addEventListener("change", applyFilters);
    });
    document.getElementById("f-scale").addEventListener("change", function () {
      Object.keys(charts).forEach(function (k) { charts[k].destroy(); delete charts[k]; });
      document.querySelectorAll(".chart").forEach(function (box) { box.dataset.drawn = ""; });
      observeAll();
    });
  }

  function chosen() {
    var out = {};
    FILTERS.forEach(function (name) { out[name] = document.getElementById("f-" + name).value; });
    return out;
  }

  function matches(item, pick) {
    return FILTERS.every(function (name) {
      return !pick[name] || item[name] === undefined || item[name] === pick[name];
    });
  }

  function resetFilters() {
    FILTERS.forEach(function (name) { document.getElementById("f-" + name).value = ""; });
    applyFilters();
  }

  function applyFilters() {
    var pick = chosen();
    var shown = 0;
    document.querySelectorAll(".case").forEach(function (card) {
      var visible = matches(JSON.parse(card.dataset.facets), pick);
      card.hidden = !visible;
      shown += visible ? 1 : 0;
    });
    document.querySelectorAll(".group").forEach(function (block) {
      block.hidden = !matches(JSON.parse(block.dataset.facets), pick);
      block.querySelectorAll("tr[data-framework]").forEach(function (tr) {
        tr.hidden = !!pick.framework && tr.dataset.framework !== pick.framework;
      });
    });
    document.getElementById("shown").textContent = shown + " of " +
      document.querySelectorAll(".case").length + " cases shown";
  }

  // -- each machine's latest tables -------------------------------------------------------------
  function drawTables() {
    var holder = document.getElementById("tables");
    D.machines.forEach(function (m) {
      var box = el("div", {"class": "machine"});
      var r = D.runs[m.latest];
      box.appendChild(el("h3", {}, m.id + ": " + r.f + " (" + runName(m.latest) + ")"));
      m.groups.forEach(function (g) {
        var block = el("div", {"class": "group", "data-facets": JSON.stringify(
          {workload: g.workload, precision: g.precision, layout: g.layout})});
        block.appendChild(el("div", {"class": "who"}, g.group));
        var table = el("table");
        var head = el("tr");
        D.header.forEach(function (h, i) {
          head.appendChild(el("th", i === D.header.length - 1 ? {"class": "text"} : {}, h));
        });
        table.appendChild(head);
        g.rows.forEach(function (row) {
          var tr = el("tr", {"data-framework": row[0].split("-")[0]});
          row.forEach(function (cell, i) {
            tr.appendChild(el("td", i === row.length - 1 ? {"class": "text"} : {}, cell));
          });
          table.appendChild(tr);
        });
        block.appendChild(table);
        box.appendChild(block);
      });
      box.appendChild(el("pre", {}, m.notes.join("\n")));
      holder.appendChild(box);
    });
  }

  // -- each case's history ----------------------------------------------------------------------
  function drawCases() {
    var holder = document.getElementById("cases");
    var byLabel = {};
    D.series.forEach(function (s, i) { (byLabel[s.label] = byLabel[s.label] || []).push(i); });
    document.getElementById("cases-note").textContent =
      "A point is a run (its commit and date on hover), the band its " +
      (100 * D.level).toFixed(0) + "% interval for the next run's figure, the grey dots its " +
      "processes' medians; a red dashed line is a step found. Machines side by side.";
    Object.keys(byLabel).sort().forEach(function (label) {
      var first = D.series[byLabel[label][0]];
      var card = el("div", {"class": "case", "id": caseId(label), "data-facets": JSON.stringify({
        workload: first.workload, framework: first.framework, precision: first.precision,
        layout: first.layout})});
      var title = el("h3", {}, label);
      var found = byLabel[label].reduce(function (n, i) {
        return n + (stepsOf[i] || []).length;
      }, 0);
      if (found) { title.appendChild(el("span", {"class": "steps"}, found + " step(s)")); }
      card.appendChild(title);
      var row = el("div", {"class": "row"});
      byLabel[label].sort(function (a, b) { return D.series[a].m - D.series[b].m; })
        .forEach(function (i) {
          var box = el("div", {"class": "chart", "data-series": i,
                               "data-steps": (stepsOf[i] || []).length});
          box.appendChild(el("div", {"class": "who"}, machines[D.series[i].m] + ", " +
                                     D.series[i].r.length + " run(s)"));
          row.appendChild(box);
        });
      card.appendChild(row);
      holder.appendChild(card);
    });
  }

  function columns(s, normalised) {
    // x: the run's place in commit order (every machine on one axis); then the band's
    // bounds, the figure, and each process's median (as many columns as the most processes)
    var scale = function (i) { return normalised ? s.n[i] / s.v[i] : 1; };
    var procs = s.p.reduce(function (n, p) { return Math.max(n, p.length); }, 0);
    var cols = [s.r, s.lo.map(function (x, i) { return x * scale(i); }),
                s.hi.map(function (x, i) { return x * scale(i); }),
                normalised ? s.n : s.v];
    for (var j = 0; j < procs; j++) {
      cols.push(s.p.map(function (p, i) { return j < p.length ? p[j] * scale(i) : null; }));
    }
    return cols;
  }

  function stepMarks(i) {
    // a uPlot draw hook: a dashed line between the runs on either side of each step
    return function (u) {
      var ctx = u.ctx;
      ctx.save();
      ctx.strokeStyle = "#b00020";
      ctx.lineWidth = 2 * devicePixelRatio;
      ctx.setLineDash([6 * devicePixelRatio, 4 * devicePixelRatio]);
      (stepsOf[i] || []).forEach(function (st) {
        var x = u.valToPos((st.before + st.at) / 2, "x", true);
        ctx.beginPath();
        ctx.moveTo(x, u.bbox.top);
        ctx.lineTo(x, u.bbox.top + u.bbox.height);
        ctx.stroke();
      });
      ctx.restore();
    };
  }

  function showTip(i) {
    var tip = document.getElementById("tip");
    return function (u) {
      var k = u.cursor.idx;
      if (k === null || k === undefined || u.cursor.left < 0) { tip.hidden = true; return; }
      var s = D.series[i];
      var r = D.runs[s.r[k]];
      var unit = document.getElementById("f-scale").value === "norm" ? "" : " ms";
      var data = u.data;
      tip.textContent = [
        "commit " + (r.c ? r.c.slice(0, 12) : "(none)") + (r.d ? " (dirty)" : ""),
        "date " + (r.t || r.s), "run " + r.f,
        "figure " + data[3][k] + unit + " [" + data[1][k].toPrecision(5) + ", " +
          data[2][k].toPrecision(5) + "]",
        "processes " + s.p[k].join(", ") + " ms"].join("\n");
      tip.style.whiteSpace = "pre";
      var rect = u.over.getBoundingClientRect();
      tip.style.left = (rect.left + u.cursor.left + 12) + "px";
      tip.style.top = (rect.top + u.cursor.top + 12) + "px";
      tip.hidden = false;
    };
  }

  function chart(box) {
    var i = Number(box.dataset.series);
    var s = D.series[i];
    var normalised = document.getElementById("f-scale").value === "norm";
    var cols = columns(s, normalised);
    var series = [{}, {stroke: "rgba(31,119,180,0.25)", points: {show: false}},
                  {stroke: "rgba(31,119,180,0.25)", points: {show: false}},
                  {stroke: "#1f77b4", width: 1.5, points: {show: true, size: 4}}];
    for (var j = 4; j < cols.length; j++) {
      series.push({stroke: "rgba(90,90,90,0.6)", paths: function () { return null; },
                   points: {show: true, size: 3, fill: "rgba(90,90,90,0.6)"}});
    }
    var opts = {
      width: 560, height: 220, legend: {show: false}, series: series,
      scales: {x: {time: false}},
      bands: [{series: [2, 1], fill: "rgba(31,119,180,0.15)"}],
      // x: runs in commit order, ticks at whole runs, labelled with the commit
      axes: [{space: 70, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000],
              values: function (u, ticks) {
                return ticks.map(function (t) {
                  return D.runs[t] ? runName(t).split(" ")[0].slice(0, 7) : "";
                });
              }, size: 30},
             {label: normalised ? "normalised" : "ms a step", size: 60}],
      hooks: {draw: [stepMarks(i)], setCursor: [showTip(i)]},
    };
    var u = new uPlot(opts, cols, box);
    u.over.addEventListener("mouseleave", function () {
      document.getElementById("tip").hidden = true;
    });
    charts[i] = u;
    box.dataset.drawn = "1";
  }

  var observer = "IntersectionObserver" in window ? new IntersectionObserver(function (seen) {
    seen.forEach(function (entry) {
      if (entry.isIntersecting && !entry.target.dataset.drawn) { chart(entry.target); }
    });
  }, {rootMargin: "300px"}) : null;

  function observeAll() {
    document.querySelectorAll(".chart").forEach(function (box) {
      if (observer) { observer.unobserve(box); observer.observe(box); } else if (!box.dataset.drawn) { chart(box); }
    });
  }

  // -- the page -------------------------------------------------------------------------------------
  var hosts = machines.length;
  document.getElementById("summary").textContent =
    D.runs.length + " run(s) on " + hosts + " machine(s), " + D.series.length +
    " case series; page written " + D.generated + " by pytest-mlbench report --html.";
  drawSteps();
  fillSelects();
  drawTables();
  drawCases();
  applyFilters();
  observeAll();
  window.addEventListener("hashchange", function () { resetFilters(); });
  window.mlbenchBuiltMs = performance.now();  // since navigation began: the page's own cost
  window.mlbenchReady = true;
})();
