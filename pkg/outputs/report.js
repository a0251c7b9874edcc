// The report's script: marks the charts drawn, and renders the table of
// every example from the JSON in #examples-data (sort, filter, open a
// row). Text goes in with textContent only: questions, SQL and result
// cells are the tenant's and may hold markup.
(function () {
  "use strict";

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }
  function num(n) { return n.toLocaleString("en-US"); }
  function secs(s) {
    if (s > 0 && s < 1) return Math.round(s * 1000) + " ms";
    if (s < 60) return s.toFixed(1) + " s";
    if (s < 3600) return Math.floor(s / 60) + "m " + String(Math.floor(s % 60)).padStart(2, "0") + "s";
    return Math.floor(s / 3600) + "h " + String(Math.floor(s / 60) % 60).padStart(2, "0") + "m";
  }
  function money(v) { return v >= 100 ? v.toFixed(2) : v.toFixed(4); }

  var COLS = [
    { key: "id", str: true }, { key: "q", str: true }, { key: "db", str: true }, { key: "dialect", str: true },
    { key: "status", str: true }, { key: "conf", str: true }, { key: "method", str: true },
    { key: "correct", val: function (r) { return r.correct === undefined ? -1 : r.correct ? 1 : 0; } },
    { key: "calls" }, { key: "tokens" }, { key: "money" }, { key: "latency" }
  ];

  function table() {
    var blob = document.getElementById("examples-data");
    if (!blob) return;
    var data = JSON.parse(blob.textContent);
    var rows = data.rows, priced = data.priced;
    var tbody = document.getElementById("ex-body");
    var count = document.getElementById("ex-count");
    var show = document.getElementById("ex-show"), dialect = document.getElementById("ex-dialect");
    var db = document.getElementById("ex-db"), text = document.getElementById("ex-text");
    var heads = document.querySelectorAll("#ex-table thead button[data-key]");
    var ncols = heads.length;
    var cols = COLS.filter(function (c) { return priced || c.key !== "money"; });

    // Each example's row is built once; sorting and filtering only
    // reorder and re-append them, which keeps 547 rows quick.
    var trs = new Array(rows.length), details = new Array(rows.length), hay = new Array(rows.length);
    for (var i = 0; i < rows.length; i++) {
      var r = rows[i], tr = el("tr");
      var b = el("button", r.id, "open");
      b.type = "button";
      b.id = "ex-open-" + i;
      b.dataset.i = i;
      b.setAttribute("aria-expanded", "false");
      var td = el("td", null, "l");
      td.appendChild(b);
      tr.appendChild(td);
      tr.appendChild(el("td", r.q || "–", "l q"));
      tr.appendChild(el("td", r.db || "–", "l"));
      tr.appendChild(el("td", r.dialect || "–", "l"));
      tr.appendChild(el("td", (r.status || "–").replace("_", " "), "l st-" + r.status));
      tr.appendChild(el("td", r.conf || "–", "l"));
      tr.appendChild(el("td", r.method || "–", "l"));
      tr.appendChild(el("td", r.correct === undefined ? "–" : r.correct ? "yes" : "no",
        "l " + (r.correct === undefined ? "" : r.correct ? "ok" : "bad")));
      tr.appendChild(el("td", num(r.calls)));
      tr.appendChild(el("td", num(r.tokens)));
      if (priced) tr.appendChild(el("td", money(r.money || 0)));
      tr.appendChild(el("td", secs(r.latency)));
      trs[i] = tr;
      hay[i] = [r.id, r.q, r.db, r.dialect, r.sql, r.error].map(function (v) { return v || ""; }).join("\n").toLowerCase();
    }

    // rowsTable is a small table of rows under the given column names.
    function rowsTable(cols, rows) {
      var wrap = el("div", null, "scroll"), t = el("table", null, "preview"), hr = el("tr");
      cols.forEach(function (c) { hr.appendChild(el("th", c)); });
      t.appendChild(hr);
      rows.forEach(function (row) {
        var rr = el("tr");
        row.forEach(function (c) { rr.appendChild(el("td", c)); });
        t.appendChild(rr);
      });
      wrap.appendChild(t);
      return wrap;
    }

    // goldDiff shows a wrong answer against gold: its rows and columns,
    // the gold rows it lacks and the rows it adds, and the gold SQL.
    function goldDiff(td, d) {
      var found = [], lost = [];
      d.gold_columns.forEach(function (c, j) {
        if (d.answer_columns[j]) found.push(c + (d.answer_columns[j] === c ? "" : " (the answer's " + d.answer_columns[j] + ")"));
        else lost.push(c);
      });
      td.appendChild(el("p", "Gold has " + d.gold_rows + " row(s), the answer " + d.answer_rows + ". Gold's columns found in the answer: " +
        (found.length ? found.join(", ") : "none") + (lost.length ? "; not found: " + lost.join(", ") : "") + "."));
      var cols = d.gold_columns.filter(function (_, j) { return d.answer_columns[j]; });
      if (!cols.length) {
        td.appendChild(el("p", "No gold column is in the answer, so its rows cannot be set against gold's.", "note"));
      } else if (!d.missing_count && !d.extra_count) {
        td.appendChild(el("p", "Over those columns the rows are the same (numbers within 0.01): the difference is in the columns or their order.", "note"));
      }
      if (d.missing_count) {
        td.appendChild(el("p", "Gold rows the answer lacks: " + d.missing_count + (d.missing.length < d.missing_count ? " (the first " + d.missing.length + ")" : "") + "."));
        td.appendChild(rowsTable(cols, d.missing));
      }
      if (d.extra_count) {
        td.appendChild(el("p", "Answer rows gold lacks: " + d.extra_count + (d.extra.length < d.extra_count ? " (the first " + d.extra.length + ")" : "") + "."));
        td.appendChild(rowsTable(cols, d.extra));
      }
      if (d.sql) { td.appendChild(el("h4", "Gold SQL")); td.appendChild(el("pre", d.sql, "sql")); }
    }

    function detail(i) {
      var r = rows[i], tr = el("tr", null, "detail"), cell = el("td"), td = el("div", null, "box");
      cell.colSpan = ncols;
      cell.appendChild(td);
      td.id = "ex-detail-" + i;
      if (r.q) { td.appendChild(el("h4", "Question")); td.appendChild(el("p", r.q)); }
      if (r.error) { td.appendChild(el("h4", "Error")); td.appendChild(el("pre", r.error, "err")); }
      td.appendChild(el("h4", "Final SQL"));
      td.appendChild(r.sql ? el("pre", r.sql, "sql") :
        el("p", r.status === "answered" ? "The SQL is not in this report (its run's folder holds it as " + r.id + ".sql)." : "No final SQL: the example has no answer."));
      td.appendChild(el("h4", "Result"));
      if (r.cols) {
        var wrap = el("div", null, "scroll"), t = el("table", null, "preview"), hr = el("tr");
        r.cols.forEach(function (c) { hr.appendChild(el("th", c)); });
        t.appendChild(hr);
        (r.rows || []).forEach(function (row) {
          var rr = el("tr");
          row.forEach(function (c) { rr.appendChild(el("td", c)); });
          t.appendChild(rr);
        });
        wrap.appendChild(t);
        td.appendChild(wrap);
        td.appendChild(el("p", (r.rows || []).length + " row(s) shown" + (r.more ? "; the result has more (" + r.id + ".csv)." : "."), "note"));
      } else {
        td.appendChild(el("p", "No result preview."));
      }
      td.appendChild(el("h4", "Against the gold"));
      td.appendChild(el("p", r.gold || "Not scored: the dataset has no gold result for this example."));
      if (r.gd) goldDiff(td, r.gd);
      td.appendChild(el("h4", "What the agent did"));
      if (r.page) {
        var p = el("p"), a = el("a", "the example's trace page");
        a.href = r.page;
        p.append("See ", a, ": every task, LLM call, query and vote.");
        td.appendChild(p);
      } else {
        td.appendChild(el("p", "No trace page for this example; quorum trace --out <this folder> --example " + r.id + " shows its trace, when one was kept."));
      }
      tr.appendChild(cell);
      return tr;
    }

    var order = rows.map(function (_, i) { return i; });
    var sortKey = "", sortDir = 1;

    function sortBy(key) {
      var col = COLS.find(function (c) { return c.key === key; });
      // Numbers sort biggest first at the first click: the slowest, the
      // costliest; words alphabetically.
      sortDir = key === sortKey ? -sortDir : (col.str ? 1 : -1);
      sortKey = key;
      var get = col.val || function (r) { var v = r[key]; return col.str ? String(v || "").toLowerCase() : (v || 0); };
      var keys = rows.map(get);
      order.sort(function (a, b) {
        var x = keys[a], y = keys[b];
        if (x < y) return -sortDir;
        if (x > y) return sortDir;
        return a - b;
      });
      heads.forEach(function (h) {
        h.parentNode.setAttribute("aria-sort", h.dataset.key === key ? (sortDir > 0 ? "ascending" : "descending") : "none");
      });
      render();
    }

    function match(i) {
      var r = rows[i];
      switch (show.value) {
        case "wrong": if (!(r.correct === false && r.status !== "failed")) return false; break;
        case "right": if (r.correct !== true) return false; break;
        case "failed": if (r.status !== "failed") return false; break;
        case "no_answer": if (r.status !== "no_answer") return false; break;
        case "low": if (r.conf !== "low") return false; break;
      }
      if (dialect.value !== "*" && r.dialect !== dialect.value) return false;
      if (db.value !== "*" && r.db !== db.value) return false;
      var q = text.value.trim().toLowerCase();
      return !q || hay[i].indexOf(q) >= 0;
    }

    function render() {
      var frag = document.createDocumentFragment(), n = 0;
      for (var k = 0; k < order.length; k++) {
        var i = order[k];
        if (!match(i)) continue;
        n++;
        frag.appendChild(trs[i]);
        if (details[i] && !details[i].hidden) frag.appendChild(details[i]);
      }
      tbody.replaceChildren(frag);
      count.textContent = n === rows.length ? "All " + num(n) + " examples." : num(n) + " of " + num(rows.length) + " examples.";
    }

    document.querySelector("#ex-table thead").addEventListener("click", function (ev) {
      var b = ev.target.closest("button[data-key]");
      if (b) sortBy(b.dataset.key);
    });
    tbody.addEventListener("click", function (ev) {
      var b = ev.target.closest("button.open");
      if (!b) return;
      var i = +b.dataset.i, open = b.getAttribute("aria-expanded") !== "true";
      if (!details[i]) details[i] = detail(i);
      details[i].hidden = !open;
      b.setAttribute("aria-expanded", String(open));
      if (open) trs[i].after(details[i]); else details[i].remove();
    });
    [show, dialect, db].forEach(function (s) { s.addEventListener("change", render); });
    text.addEventListener("input", render);
    render();
  }

  function ready() {
    // Marks every chart drawn (non-empty box, at least one bar or line)
    // and the page ready, for the rendering test and anyone checking.
    document.querySelectorAll("svg.chart").forEach(function (s) {
      var b = s.getBBox();
      var ok = b.width > 0 && b.height > 0 && s.querySelector("rect, polyline") !== null;
      s.setAttribute("data-drawn", ok ? "yes" : "no");
    });
    document.body.setAttribute("data-ready", "yes");
  }

  table();
  // Time to interactive: the rows built, laid out (reading a size forces
  // the layout) and their handlers attached.
  void document.body.offsetHeight;
  performance.mark("quorum-table-ready");
  if (document.readyState === "complete") ready(); else addEventListener("load", ready);
})();
