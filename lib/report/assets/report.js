// Draws the report's charts and the world-model tree as inline SVG from the
// data embedded in the page (script#ks-report-data). Plain ES2017, no
// libraries, nothing fetched: the page works from a file, offline.
(function () {
  "use strict";

  var data;
  try {
    data = JSON.parse(document.getElementById("ks-report-data").textContent);
  } catch (e) {
    return;  // the server-rendered tables still show
  }
  var nojs = document.querySelectorAll(".nojs");
  for (var i = 0; i < nojs.length; i++) nojs[i].remove();

  // ---- helpers ------------------------------------------------------------
  function esc(s) {
    return String(s === undefined || s === null ? "" : s).replace(/[&<>"']/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;"}[c];
    });
  }
  function num(v) { return typeof v === "number" && isFinite(v) ? v : 0; }
  function fmtMs(v) {
    v = num(v);
    if (v <= 0) return "-";
    if (v >= 100) return v.toFixed(1) + " ms";
    if (v >= 1) return v.toFixed(3) + " ms";
    return v.toPrecision(3) + " ms";
  }
  function fmtTick(v) { return v >= 100 ? v.toFixed(0) : String(Number(v.toPrecision(2))); }
  function fmtInt(v) { return Math.round(num(v)).toLocaleString("en-US"); }
  function fmtUsd(v) { return "$" + num(v).toFixed(num(v) < 1 ? 4 : 2); }
  function shorten(s, n) { s = String(s || ""); return s.length > n ? s.slice(0, n - 1) + "\u2026" : s; }
  function width(el, min) { return Math.max(min, Math.floor(el.clientWidth || 0) - 4); }
  function svg(w, h, body, label) {
    return "<svg width=\"" + w + "\" height=\"" + h + "\" viewBox=\"0 0 " + w + " " + h + "\" role=\"img\" aria-label=\"" +
        esc(label) + "\">" + body + "</svg>";
  }
  function tipAttr(text) { return " data-tip=\"" + esc(text) + "\""; }

  // One tooltip for the page: any element with data-tip shows it on hover.
  var tip = document.getElementById("tooltip");
  document.addEventListener("mousemove", function (ev) {
    var t = ev.target && ev.target.closest ? ev.target.closest("[data-tip]") : null;
    if (!t) { tip.style.display = "none"; return; }
    tip.textContent = t.getAttribute("data-tip");
    tip.style.display = "block";
    var x = ev.clientX + 14, y = ev.clientY + 14;
    var r = tip.getBoundingClientRect();
    if (x + r.width > window.innerWidth - 8) x = ev.clientX - r.width - 14;
    if (y + r.height > window.innerHeight - 8) y = ev.clientY - r.height - 14;
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  });

  var STATUS_COLOR = {
    passed: "#2e7d32", compile_error: "#ef6c00", incorrect: "#c62828", runtime_error: "#ad1457",
    timeout: "#6a1b9a", crashed: "#4e342e", invalid: "#37474f", generation_failed: "#9e9e9e",
    memory_limit: "#00838f"
  };
  var FAIL_SHAPES = ["tri", "square", "diamond", "cross", "tridown", "star"];
  function marker(shape, x, y, r, color, extra) {
    var p;
    if (shape === "circle") return "<circle cx=\"" + x + "\" cy=\"" + y + "\" r=\"" + r + "\" fill=\"" + color + "\"" + extra + "/>";
    if (shape === "square") return "<rect x=\"" + (x - r) + "\" y=\"" + (y - r) + "\" width=\"" + 2 * r + "\" height=\"" + 2 * r +
        "\" fill=\"" + color + "\"" + extra + "/>";
    if (shape === "diamond") p = [[x, y - r * 1.3], [x + r * 1.3, y], [x, y + r * 1.3], [x - r * 1.3, y]];
    else if (shape === "tridown") p = [[x - r * 1.2, y - r], [x + r * 1.2, y - r], [x, y + r * 1.2]];
    else if (shape === "cross") {
      var a = r * 0.45;
      p = [[x - a, y - r], [x + a, y - r], [x + a, y - a], [x + r, y - a], [x + r, y + a], [x + a, y + a], [x + a, y + r],
           [x - a, y + r], [x - a, y + a], [x - r, y + a], [x - r, y - a], [x - a, y - a]];
    } else if (shape === "star") {
      p = [];
      for (var k = 0; k < 10; k++) {
        var rr = k % 2 ? r * 0.5 : r * 1.3, ang = Math.PI / 5 * k - Math.PI / 2;
        p.push([x + rr * Math.cos(ang), y + rr * Math.sin(ang)]);
      }
    } else p = [[x, y - r * 1.2], [x + r * 1.2, y + r], [x - r * 1.2, y + r]];  // tri
    return "<polygon points=\"" + p.map(function (q) { return q[0].toFixed(1) + "," + q[1].toFixed(1); }).join(" ") +
        "\" fill=\"" + color + "\"" + extra + "/>";
  }

  // Log-scale ticks: 1-2-5 steps when the range is narrow, decades otherwise.
  function logTicks(lo, hi) {
    var out = [], steps = Math.log10(hi / lo) > 2.5 ? [1] : Math.log10(hi / lo) > 1 ? [1, 2, 5] : [1, 1.5, 2, 3, 5, 7];
    for (var e = Math.floor(Math.log10(lo)) - 1; e <= Math.ceil(Math.log10(hi)); e++)
      for (var s = 0; s < steps.length; s++) {
        var v = steps[s] * Math.pow(10, e);
        if (v >= lo && v <= hi) out.push(v);
      }
    return out;
  }
  function niceStep(range, count) {
    var raw = range / Math.max(1, count), mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var n = raw / mag;
    return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10) * mag;
  }

  var attempts = data.attempts || [];
  var best = data.best || null;

  // ---- latency over rounds -----------------------------------------------
  (function latencyChart() {
    var el = document.getElementById("latency-chart");
    if (!attempts.length) { el.innerHTML = "<p class=\"note\">No attempt recorded yet.</p>"; return; }
    var W = width(el, 640), H = 340, ml = 70, mr = 24, mt = 14, plotH = 220, stripY = mt + plotH + 44;
    var maxX = 1;
    attempts.forEach(function (a) { maxX = Math.max(maxX, num(a.x)); });
    var x0 = 0.5, x1 = maxX + 0.5;
    function X(v) { return ml + (v - x0) / (x1 - x0) * (W - ml - mr); }
    var passed = attempts.filter(function (a) { return a.status === "passed" && num(a.latency_ms) > 0; });
    var vals = passed.map(function (a) { return a.latency_ms; });
    var refMs = best ? num(best.reference_latency_ms) : 0;
    if (refMs > 0) vals.push(refMs);
    var body = "";
    // x axis with integer round ticks
    var step = Math.max(1, Math.round(niceStep(maxX, 14)));
    body += "<g class=\"axis\"><line x1=\"" + ml + "\" x2=\"" + (W - mr) + "\" y1=\"" + (mt + plotH) + "\" y2=\"" + (mt + plotH) + "\"/>";
    for (var r = 1; r <= maxX; r += step)
      body += "<line x1=\"" + X(r) + "\" x2=\"" + X(r) + "\" y1=\"" + (mt + plotH) + "\" y2=\"" + (mt + plotH + 4) + "\"/>" +
          "<text x=\"" + X(r) + "\" y=\"" + (mt + plotH + 16) + "\" text-anchor=\"middle\">" + r + "</text>";
    body += "<text x=\"" + ((ml + W - mr) / 2) + "\" y=\"" + (mt + plotH + 32) + "\" text-anchor=\"middle\" class=\"muted\">round</text></g>";
    if (vals.length) {
      var lo = Math.min.apply(null, vals) / 1.25, hi = Math.max.apply(null, vals) * 1.25;
      if (hi / lo < 3) { var mid = Math.sqrt(hi * lo); lo = mid / 1.8; hi = mid * 1.8; }
      var L0 = Math.log(lo), L1 = Math.log(hi);
      var Y = function (v) { return mt + plotH - (Math.log(v) - L0) / (L1 - L0) * plotH; };
      var ticks = logTicks(lo, hi);
      body += "<g class=\"grid\">";
      ticks.forEach(function (t) { body += "<line x1=\"" + ml + "\" x2=\"" + (W - mr) + "\" y1=\"" + Y(t) + "\" y2=\"" + Y(t) + "\"/>"; });
      body += "</g><g class=\"axis\"><line x1=\"" + ml + "\" x2=\"" + ml + "\" y1=\"" + mt + "\" y2=\"" + (mt + plotH) + "\"/>";
      ticks.forEach(function (t) {
        body += "<text x=\"" + (ml - 6) + "\" y=\"" + (Y(t) + 4) + "\" text-anchor=\"end\">" + esc(fmtTick(t)) + "</text>";
      });
      body += "<text transform=\"translate(16," + (mt + plotH / 2) + ") rotate(-90)\" text-anchor=\"middle\" class=\"muted\">latency, ms (log)</text></g>";
      if (refMs > 0)
        body += "<line x1=\"" + ml + "\" x2=\"" + (W - mr) + "\" y1=\"" + Y(refMs) + "\" y2=\"" + Y(refMs) +
            "\" stroke=\"#8e24aa\" stroke-dasharray=\"6 4\"" + tipAttr("reference: " + fmtMs(refMs)) + "/>" +
            "<text x=\"" + (ml + 6) + "\" y=\"" + (Y(refMs) - 5) + "\" fill=\"#8e24aa\">reference " +
            esc(fmtMs(refMs)) + "</text>";
      // best-so-far as a step line over the counted rounds
      var pts = [];
      attempts.forEach(function (a) { if (a.round > 0 && num(a.best_ms) > 0) pts.push([X(a.x), Y(a.best_ms)]); });
      if (pts.length) {
        var d = "M" + pts[0][0] + "," + pts[0][1];
        for (var k = 1; k < pts.length; k++) d += " H" + pts[k][0] + " V" + pts[k][1];
        d += " H" + X(maxX + 0.4);
        body += "<path id=\"best-line\" d=\"" + d + "\" fill=\"none\" stroke=\"#1565c0\" stroke-width=\"2\"/>";
      }
      passed.forEach(function (a) {
        var t = "round " + a.round + (a.round > 0 ? "" : " (not counted)") + ": passed " + fmtMs(a.latency_ms) +
            (a.speedup > 0 ? " (" + a.speedup.toFixed(2) + "x the reference)" : "") + "\nbest so far " + fmtMs(a.best_ms) +
            "\n" + a.action + "\nsolution " + a.solution_id;
        body += marker("circle", X(a.x), Y(a.latency_ms), a.improved ? 5.5 : 4, a.improved ? "#1565c0" : "#2e7d32",
            " class=\"pt pt-passed\" data-seq=\"" + a.seq + "\" stroke=\"#fff\" stroke-width=\"1\"" + tipAttr(t));
      });
    } else {
      body += "<text x=\"" + ((ml + W - mr) / 2) + "\" y=\"" + (mt + plotH / 2) + "\" text-anchor=\"middle\" class=\"muted\">" +
          "no attempt has passed yet</text>";
    }
    // failures in a strip below the axis, one shape and colour per status
    var fstatus = [];
    attempts.forEach(function (a) { if (a.status !== "passed" && fstatus.indexOf(a.status) < 0) fstatus.push(a.status); });
    body += "<text x=\"" + (ml - 6) + "\" y=\"" + (stripY + 4) + "\" text-anchor=\"end\" class=\"muted\">failed</text>";
    attempts.forEach(function (a) {
      if (a.status === "passed") return;
      var shape = FAIL_SHAPES[fstatus.indexOf(a.status) % FAIL_SHAPES.length];
      var t = "round " + a.round + (a.round > 0 ? "" : " (not counted)") + ": " + (a.reason || a.status) + "\n" + a.action;
      body += marker(shape, X(a.x), stripY, 5, STATUS_COLOR[a.status] || "#616161",
          " class=\"pt pt-failed\" data-seq=\"" + a.seq + "\" data-status=\"" + esc(a.status) + "\"" + tipAttr(t));
    });
    var legend = "<div class=\"legend\"><span><span class=\"sw\" style=\"background:#2e7d32\"></span>passed</span>" +
        "<span><span class=\"sw\" style=\"background:#1565c0\"></span>new best</span>" +
        "<span><span class=\"sw\" style=\"background:#1565c0;height:3px\"></span>best so far</span>";
    fstatus.forEach(function (s, i) {
      var n = attempts.filter(function (a) { return a.status === s; }).length;
      legend += "<span>" + svg(14, 14, marker(FAIL_SHAPES[i % FAIL_SHAPES.length], 7, 7, 4.5, STATUS_COLOR[s] || "#616161", ""), s)
          .replace("<svg ", "<svg style=\"display:inline;vertical-align:-2px\" ") + " " + esc(s) + " (" + n + ")</span>";
    });
    legend += "</div>";
    el.innerHTML = svg(W, H, body, "latency over rounds") + legend;
  })();

  // ---- world model tree --------------------------------------------------
  var NODE_FILL = {root: "#e0e0e0", solved: "#a5d6a7", active: "#90caf9", open: "#fff59d", too_hard: "#ef9a9a",
                   waiting: "#f5f5f5", decision: "#ffffff"};
  var NODE_WORDS = {root: "root", solved: "kernel attached", active: "being worked on", open: "open (executable)",
                    too_hard: "no passing kernel in its cycle", waiting: "waiting for its parent's kernel",
                    decision: "design choice (no action)"};
  (function worldModel() {
    var wm = data.world_model || {snapshots: [], nodes: [], texts: []};
    var snaps = wm.snapshots || [];
    var tree = document.getElementById("wm-tree"), details = document.getElementById("wm-details");
    var controls = document.getElementById("wm-controls");
    if (!snaps.length) {
      tree.innerHTML = "<p class=\"note\" style=\"padding:8px\">No world-model snapshot (the strategy " +
          esc(data.run && data.run.strategy) + " keeps none, or none is written yet).</p>";
      details.style.display = "none";
      return;
    }
    var selected = null, current = snaps.length - 1;
    controls.innerHTML = "<button type=\"button\" id=\"wm-prev\">&#9664;</button>" +
        "<input type=\"range\" id=\"wm-slider\" min=\"0\" max=\"" + (snaps.length - 1) + "\" value=\"" + current + "\" step=\"1\">" +
        "<button type=\"button\" id=\"wm-next\">&#9654;</button><span id=\"wm-label\"></span>";
    var legend = "<div class=\"legend\">";
    Object.keys(NODE_FILL).forEach(function (k) {
      legend += "<span><span class=\"sw\" style=\"background:" + NODE_FILL[k] + "\"></span>" + esc(k.replace("_", " ")) + "</span>";
    });
    legend += "<span>size = priority V; number = difficulty; dashed ring = changed in this version</span></div>";
    controls.insertAdjacentHTML("afterend", legend);
    var slider = document.getElementById("wm-slider");

    function nodeText(n) {
      var t = n.id + " [" + n.status + "]" + (n.title ? "\n" + n.title : "");
      if (typeof n.score === "number") t += "\nV " + n.score.toFixed(2);
      if (n.difficulty) t += "  difficulty " + n.difficulty;
      if (n.solution_id) t += "\nkernel " + n.solution_id + ": " + fmtMs(n.latency_ms) + (n.speedup > 0 ? " (" + n.speedup.toFixed(2) + "x)" : "");
      return t;
    }
    function showDetails(n, snap) {
      if (!n) {
        var summary = wm.texts[snap.summary] || "", qs = wm.texts[snap.questions] || [];
        details.innerHTML = "<dl><dt>version</dt><dd>" + esc(snap.version) + " (after round " + esc(snap.round) + ")</dd>" +
            (summary ? "<dt>kernel summary</dt><dd>" + esc(summary) + "</dd>" : "") +
            (qs.length ? "<dt>open questions</dt><dd>" + qs.map(function (q) { return "\u2022 " + esc(q); }).join("\n") + "</dd>" : "") +
            "</dl><p class=\"note\">Click a node for its details.</p>";
        return;
      }
      var rows = [["node", n.id + (n.parent ? " (parent " + n.parent + ")" : "")], ["status", n.status + ": " + (NODE_WORDS[n.status] || "")],
                  ["title", n.title], ["decision", n.decision], ["choice", n.choice], ["description", n.description],
                  ["rationale", n.rationale],
                  ["priority V", typeof n.score === "number" ? n.score.toFixed(3) : ""], ["difficulty", n.difficulty || ""],
                  ["expected vs base", typeof n.expected_factor === "number" ? n.expected_factor + "x" : ""],
                  ["overall rating", typeof n.rating === "number" ? n.rating + " / 10" : ""],
                  ["confidence", typeof n.confidence === "number" ? n.confidence : ""],
                  ["kernel", n.solution_id ? n.solution_id + (n.solution_name ? " (" + n.solution_name + ")" : "") + ": " +
                      fmtMs(n.latency_ms) + (n.speedup > 0 ? ", " + n.speedup.toFixed(2) + "x the reference" : "") : ""],
                  ["last updated in round", n.last_updated_round || ""], ["notes", n.notes]];
      details.innerHTML = "<dl>" + rows.filter(function (r) { return r[1] !== "" && r[1] !== undefined; }).map(function (r) {
        return "<dt>" + esc(r[0]) + "</dt><dd>" + esc(r[1]) + "</dd>";
      }).join("") + "</dl>";
    }

    function draw(idx) {
      current = idx;
      var snap = snaps[idx];
      var nodes = snap.nodes.map(function (i) { return wm.nodes[i]; });
      var prev = idx > 0 ? snaps[idx - 1].nodes : null;
      var byId = {}, kids = {};
      nodes.forEach(function (n) { byId[n.id] = n; kids[n.id] = []; });
      var roots = [];
      nodes.forEach(function (n) {
        if (n.parent && byId[n.parent] && n.parent !== n.id) kids[n.parent].push(n.id); else roots.push(n.id);
      });
      // Leaves take consecutive slots; a parent sits over its children.
      var pos = {}, slot = 0, maxDepth = 0, seen = {};
      function place(id, depth) {
        if (seen[id]) return;
        seen[id] = true;
        maxDepth = Math.max(maxDepth, depth);
        var ch = kids[id].filter(function (c) { return !seen[c]; });
        if (!ch.length) { pos[id] = {x: slot++, d: depth}; return; }
        ch.forEach(function (c) { place(c, depth + 1); });
        var xs = ch.filter(function (c) { return pos[c]; }).map(function (c) { return pos[c].x; });
        pos[id] = {x: (Math.min.apply(null, xs) + Math.max.apply(null, xs)) / 2, d: depth};
      }
      roots.forEach(function (r) { place(r, 0); });
      var slotW = 132, rowH = 96, pad = 60;
      var W = Math.max(width(tree, 360), slot * slotW + 2 * pad - slotW), H = (maxDepth + 1) * rowH + 40;
      var off = (W - (slot - 1) * slotW) / 2;
      function PX(id) { return off + pos[id].x * slotW; }
      function PY(id) { return 30 + pos[id].d * rowH; }
      function R(n) { return n.status === "root" ? 11 : 7 + 13 * Math.max(0, Math.min(1, typeof n.score === "number" ? n.score : 0.5)); }
      var body = "<g class=\"edges\">";
      nodes.forEach(function (n) {
        if (!pos[n.id] || !n.parent || !pos[n.parent] || n.parent === n.id) return;
        var x1 = PX(n.parent), y1 = PY(n.parent) + R(byId[n.parent]), x2 = PX(n.id), y2 = PY(n.id) - R(n);
        var my = (y1 + y2) / 2;
        body += "<path d=\"M" + x1 + "," + y1 + " C" + x1 + "," + my + " " + x2 + "," + my + " " + x2 + "," + y2 +
            "\" fill=\"none\" stroke=\"#90a4ae\" stroke-width=\"1.4\"/>";
      });
      body += "</g>";
      nodes.forEach(function (n, k) {
        if (!pos[n.id]) return;
        var x = PX(n.id), y = PY(n.id), r = R(n);
        var changed = prev && prev.indexOf(snap.nodes[k]) < 0;
        var ring = n.id === snap.active ? " stroke=\"#0d47a1\" stroke-width=\"3\"" : " stroke=\"#78909c\" stroke-width=\"1.2\"";
        body += "<g class=\"wm-node" + (n.id === selected ? " selected" : "") + "\" data-id=\"" + esc(n.id) + "\" data-status=\"" +
            esc(n.status) + "\"" + tipAttr(nodeText(n)) + ">";
        if (changed) body += "<circle cx=\"" + x + "\" cy=\"" + y + "\" r=\"" + (r + 4) + "\" fill=\"none\" stroke=\"#ff6f00\" stroke-dasharray=\"3 2\"/>";
        body += "<circle cx=\"" + x + "\" cy=\"" + y + "\" r=\"" + r + "\" fill=\"" + (NODE_FILL[n.status] || "#fff") + "\"" + ring + "/>";
        if (n.difficulty) body += "<text x=\"" + x + "\" y=\"" + (y + 4) + "\" text-anchor=\"middle\">" + n.difficulty + "</text>";
        body += "<text x=\"" + x + "\" y=\"" + (y + r + 13) + "\" text-anchor=\"middle\">" + esc(shorten(n.id, 18)) + "</text>";
        var sub = n.status === "root" ? "" : n.solution_id ? fmtMs(n.latency_ms) : shorten(n.title, 20);
        if (sub) body += "<text x=\"" + x + "\" y=\"" + (y + r + 26) + "\" text-anchor=\"middle\" class=\"muted\">" + esc(sub) + "</text>";
        body += "</g>";
      });
      tree.innerHTML = svg(W, H, body, "world model version " + snap.version);
      document.getElementById("wm-label").textContent = "snapshot " + (idx + 1) + " of " + snaps.length + ": version " +
          snap.version + ", after round " + snap.round + ", " + nodes.length + " nodes" +
          (idx === snaps.length - 1 ? " (latest)" : "");
      slider.value = idx;
      showDetails(selected && byId[selected] ? byId[selected] : null, snap);
      var gs = tree.querySelectorAll(".wm-node");
      for (var g = 0; g < gs.length; g++)
        gs[g].addEventListener("click", function () {
          var id = this.getAttribute("data-id");
          selected = selected === id ? null : id;
          draw(current);
        });
    }
    slider.addEventListener("input", function () { draw(parseInt(slider.value, 10)); });
    document.getElementById("wm-prev").addEventListener("click", function () { if (current > 0) draw(current - 1); });
    document.getElementById("wm-next").addEventListener("click", function () { if (current < snaps.length - 1) draw(current + 1); });
    draw(current);
  })();

  // ---- per-workload bars -------------------------------------------------
  (function workloadBars() {
    var el = document.getElementById("workload-chart");
    if (!best) { el.innerHTML = ""; return; }
    var rows = (best.workloads || []).filter(function (w) { return num(w.mean_ms) > 0; });
    if (!rows.length) { el.innerHTML = "<p class=\"note\">The best kernel has no timed workload.</p>"; return; }
    var series = [["best kernel", "#1565c0", function (w) { return w.mean_ms; }],
                  ["reference", "#8e24aa", function (w) { return w.reference_ms; }]];
    var BASE_COLORS = ["#ef6c00", "#757575", "#00897b"];
    (best.baselines || []).forEach(function (b, i) {
      series.push([b, BASE_COLORS[i % BASE_COLORS.length], function (w) { return w.baselines ? w.baselines[b] : 0; }]);
    });
    var W = width(el, 640), labelW = 190, valueW = 170, barH = 14, gap = 12;
    var groupH = series.length * (barH + 3) + gap, H = rows.length * groupH + 10;
    var body = "";
    rows.forEach(function (w, gi) {
      var y0 = 6 + gi * groupH, vals = series.map(function (s) { return num(s[2](w)); });
      var max = Math.max.apply(null, vals);
      body += "<text x=\"0\" y=\"" + (y0 + 12) + "\">" + esc(shorten(w.name, 28)) + "</text>";
      series.forEach(function (s, si) {
        var v = vals[si];
        if (!(v > 0)) return;
        var y = y0 + si * (barH + 3), len = (W - labelW - valueW) * v / max;
        var rel = si === 0 ? "" : " (" + (v / w.mean_ms).toFixed(2) + "x the best)";
        body += "<rect class=\"bar\" data-series=\"" + esc(s[0]) + "\" x=\"" + labelW + "\" y=\"" + y + "\" width=\"" + Math.max(1, len) +
            "\" height=\"" + barH + "\" fill=\"" + s[1] + "\"" + tipAttr(w.name + "\n" + s[0] + ": " + fmtMs(v) + rel) + "/>" +
            "<text x=\"" + (labelW + len + 6) + "\" y=\"" + (y + barH - 3) + "\">" + esc(fmtMs(v) + rel) + "</text>";
      });
    });
    var legend = "<div class=\"legend\">" + series.map(function (s) {
      return "<span><span class=\"sw\" style=\"background:" + s[1] + "\"></span>" + esc(s[0]) + "</span>";
    }).join("") + "<span>mean latency per workload; each group is scaled to its longest bar</span></div>";
    el.innerHTML = legend + svg(W, H, body, "best kernel per workload");
  })();

  // ---- LLM tokens and cost -----------------------------------------------
  (function llmChart() {
    var el = document.getElementById("llm-chart"), kindsEl = document.getElementById("llm-kinds");
    var llm = data.llm || {rounds: [], kinds: []};
    var rounds = llm.rounds || [];
    if (!rounds.length) { el.innerHTML = "<p class=\"note\">No LLM call recorded.</p>"; return; }
    var W = width(el, 640), H = 260, ml = 70, mr = 70, mt = 14, plotH = 190;
    var maxR = 1, maxTok = 0, maxCost = 0;
    rounds.forEach(function (r) {
      maxR = Math.max(maxR, r.round);
      maxTok = Math.max(maxTok, num(r.input_tokens) + num(r.output_tokens));
      maxCost = Math.max(maxCost, num(r.cum_cost_usd));
    });
    var x0 = 0.5, x1 = maxR + 0.5;
    function X(v) { return ml + (v - x0) / (x1 - x0) * (W - ml - mr); }
    // Whole tokens per tick; with nothing recorded only the zero line shows.
    var tokStep = Math.max(1, niceStep(maxTok || 1, 4)), costStep = niceStep(maxCost || 1, 4);
    var tokTop = maxTok > 0 ? tokStep * Math.ceil(maxTok / tokStep) : 1;
    var costTop = maxCost > 0 ? costStep * Math.ceil(maxCost / costStep) : 1;
    if (maxTok === 0) tokStep = 2;
    if (maxCost === 0) costStep = 2;
    function YT(v) { return mt + plotH - v / tokTop * plotH; }
    function YC(v) { return mt + plotH - v / costTop * plotH; }
    var body = "<g class=\"grid\">";
    for (var t = 0; t <= tokTop + 1e-9; t += tokStep)
      body += "<line x1=\"" + ml + "\" x2=\"" + (W - mr) + "\" y1=\"" + YT(t) + "\" y2=\"" + YT(t) + "\"/>";
    body += "</g><g class=\"axis\">";
    for (t = 0; t <= tokTop + 1e-9; t += tokStep)
      body += "<text x=\"" + (ml - 6) + "\" y=\"" + (YT(t) + 4) + "\" text-anchor=\"end\">" + fmtInt(t) + "</text>";
    for (var c = 0; c <= costTop + 1e-12; c += costStep)
      body += "<text x=\"" + (W - mr + 6) + "\" y=\"" + (YC(c) + 4) + "\" fill=\"#ef6c00\">" + esc(fmtUsd(c)) + "</text>";
    body += "<line x1=\"" + ml + "\" x2=\"" + (W - mr) + "\" y1=\"" + (mt + plotH) + "\" y2=\"" + (mt + plotH) + "\"/>";
    var step = Math.max(1, Math.round(niceStep(maxR, 14)));
    for (var r = 1; r <= maxR; r += step)
      body += "<text x=\"" + X(r) + "\" y=\"" + (mt + plotH + 16) + "\" text-anchor=\"middle\">" + r + "</text>";
    body += "<text x=\"" + ((ml + W - mr) / 2) + "\" y=\"" + (mt + plotH + 32) + "\" text-anchor=\"middle\" class=\"muted\">round</text>" +
        "<text transform=\"translate(16," + (mt + plotH / 2) + ") rotate(-90)\" text-anchor=\"middle\" class=\"muted\">tokens per round</text>" +
        "<text transform=\"translate(" + (W - 10) + "," + (mt + plotH / 2) + ") rotate(90)\" text-anchor=\"middle\" fill=\"#ef6c00\">cumulative cost</text></g>";
    var bw = Math.max(2, Math.min(28, (W - ml - mr) / (maxR + 1) * 0.7));
    rounds.forEach(function (r) {
      var tip = "round " + r.round + ": " + r.calls + " call(s)\ninput " + fmtInt(r.input_tokens) + " tokens, output " +
          fmtInt(r.output_tokens) + " (reasoning " + fmtInt(r.reasoning_tokens) + ")\ncost " + fmtUsd(r.cost_usd) +
          ", cumulative " + fmtUsd(r.cum_cost_usd);
      var yi = YT(num(r.input_tokens)), yo = YT(num(r.input_tokens) + num(r.output_tokens));
      body += "<g class=\"llm-round\" data-round=\"" + r.round + "\"" + tipAttr(tip) + ">" +
          "<rect x=\"" + (X(r.round) - bw / 2) + "\" y=\"" + yi + "\" width=\"" + bw + "\" height=\"" + (mt + plotH - yi) + "\" fill=\"#90caf9\"/>" +
          "<rect x=\"" + (X(r.round) - bw / 2) + "\" y=\"" + yo + "\" width=\"" + bw + "\" height=\"" + (yi - yo) + "\" fill=\"#1565c0\"/>" +
          "<rect x=\"" + (X(r.round) - bw / 2) + "\" y=\"" + mt + "\" width=\"" + bw + "\" height=\"" + plotH + "\" fill=\"transparent\"/></g>";
    });
    var d = "";
    rounds.forEach(function (r, i) { d += (i ? " L" : "M") + X(r.round) + "," + YC(num(r.cum_cost_usd)); });
    body += "<path d=\"" + d + "\" fill=\"none\" stroke=\"#ef6c00\" stroke-width=\"2\"/>";
    var legend = "<div class=\"legend\"><span><span class=\"sw\" style=\"background:#90caf9\"></span>input tokens</span>" +
        "<span><span class=\"sw\" style=\"background:#1565c0\"></span>output tokens</span>" +
        "<span><span class=\"sw\" style=\"background:#ef6c00;height:3px\"></span>cumulative cost</span>" +
        (maxTok === 0 ? "<span>no tokens recorded: the model (a replayed transcript or a command) reported none</span>" : "") + "</div>";
    el.innerHTML = svg(W, H, body, "LLM tokens and cost over rounds") + legend;
    var kinds = llm.kinds || [];
    kindsEl.innerHTML = "<table class=\"grid\"><tr><th>call kind</th><th>calls</th><th>input tokens</th><th>output tokens</th>" +
        "<th>reasoning</th><th>cost</th><th>wall time</th></tr>" + kinds.map(function (k) {
          return "<tr><td>" + esc(k.kind) + "</td><td>" + k.calls + "</td><td>" + fmtInt(k.input_tokens) + "</td><td>" +
              fmtInt(k.output_tokens) + "</td><td>" + fmtInt(k.reasoning_tokens) + "</td><td>" + esc(fmtUsd(k.cost_usd)) +
              "</td><td>" + num(k.wall_s).toFixed(1) + " s</td></tr>";
        }).join("") + "</table>";
  })();

  document.body.setAttribute("data-rendered", "1");
})();
