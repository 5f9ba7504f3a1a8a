// helikon studio: the evals and sessions views. Every string is set with
// textContent, never parsed as HTML; the charts are drawn as SVG shapes.
"use strict";

(function () {
  const SVG = "http://www.w3.org/2000/svg";

  const make = el; // dom.js

  function shape(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function short(text, limit) {
    text = String(text ?? "");
    return text.length > limit ? text.slice(0, limit - 1) + "\u2026" : text;
  }

  function number(value) {
    return value === null || value === undefined ? "-" : Number(value).toFixed(2);
  }

  function when(ms) {
    return ms ? new Date(ms).toISOString().slice(0, 16).replace("T", " ") : "-";
  }

  async function getJson(path) {
    const response = await fetch(api(path));
    const data = await response.json();
    if (!response.ok) throw new Error(data.error ? data.error.message : `HTTP ${response.status}`);
    return data;
  }

  // ---- charts (the HTML eval report's three) ----
  const GREEN = "#2e7d32", RED = "#c62828", GREY = "#9e9e9e";

  function binColour(index, bins) {
    const t = index / Math.max(bins - 1, 1);
    return `hsl(${Math.round(120 * t)}, 62%, ${Math.round(45 - 12 * t)}%)`;
  }

  function svg(width, height, label) {
    return shape("svg", { class: "chart", role: "img", "aria-label": label, viewBox: `0 0 ${width} ${height}` });
  }

  function distributionChart(counts) {
    const width = 420, height = 200, left = 34, bottom = 28, top = 12;
    const chart = svg(width, height, "score distribution");
    const peak = Math.max(...counts, 0);
    if (!peak) {
      chart.append(shape("text", { x: width / 2, y: height / 2, "text-anchor": "middle" }, "no scores"));
      return chart;
    }
    const plotW = width - left - 8, plotH = height - bottom - top, barW = plotW / counts.length;
    chart.append(shape("line", { x1: left, y1: top + plotH, x2: width - 8, y2: top + plotH, stroke: "#90a4ae" }));
    for (const tick of [...new Set([0, Math.floor(peak / 2), peak])].sort((a, b) => a - b)) {
      const y = top + plotH - (plotH * tick) / peak;
      chart.append(shape("text", { x: left - 6, y: y + 4, "text-anchor": "end" }, String(tick)));
    }
    counts.forEach((count, i) => {
      const h = (plotH * count) / peak, x = left + i * barW;
      const bar = shape("rect", { class: "bar", x: x + 2, y: top + plotH - h, width: barW - 4, height: h, fill: binColour(i, counts.length) });
      bar.append(shape("title", {}, `${(i / counts.length).toFixed(1)}-${((i + 1) / counts.length).toFixed(1)}: ${count} score(s)`));
      chart.append(bar);
      if (i % 2 === 0) chart.append(shape("text", { x, y: height - 10, "text-anchor": "middle" }, (i / counts.length).toFixed(1)));
    });
    chart.append(shape("text", { x: width - 8, y: height - 10, "text-anchor": "end" }, "1.0"));
    return chart;
  }

  function outcomesChart(stats) {
    const row = 26, labelW = 150, width = 460, height = row * stats.length + 30;
    const chart = svg(width, height, "outcomes per evaluator");
    const most = Math.max(1, ...stats.map((s) => s.passed + s.failed + s.skipped));
    stats.forEach((s, n) => {
      const y = n * row + 4;
      chart.append(shape("text", { x: labelW - 8, y: y + 14, "text-anchor": "end" }, short(s.evaluator, 22)));
      let x = labelW;
      for (const [count, colour, what] of [[s.passed, GREEN, "passed"], [s.failed, RED, "failed"], [s.skipped, GREY, "skipped"]]) {
        const w = ((width - labelW - 40) * count) / most;
        if (count) {
          const bar = shape("rect", { class: "bar", x, y, width: w, height: 18, fill: colour });
          bar.append(shape("title", {}, `${s.evaluator}: ${count} ${what}`));
          chart.append(bar);
        }
        x += w;
      }
      chart.append(shape("text", { x: x + 4, y: y + 14 }, `${s.passed}/${s.passed + s.failed}`));
    });
    [[GREEN, "passed"], [RED, "failed"], [GREY, "skipped"]].forEach(([colour, what], i) => {
      chart.append(shape("rect", { x: labelW + i * 80, y: height - 17, width: 10, height: 10, fill: colour }));
      chart.append(shape("text", { x: labelW + i * 80 + 14, y: height - 8 }, what));
    });
    return chart;
  }

  function meansChart(stats) {
    const row = 26, labelW = 150, width = 460, height = row * stats.length + 8, plotW = width - labelW - 50;
    const chart = svg(width, height, "mean score per evaluator");
    stats.forEach((s, n) => {
      const y = n * row + 4;
      chart.append(shape("text", { x: labelW - 8, y: y + 14, "text-anchor": "end" }, short(s.evaluator, 22)));
      chart.append(shape("rect", { x: labelW, y, width: plotW, height: 18, fill: "#eceff1" }));
      if (s.mean !== null) {
        const bar = shape("rect", { class: "bar", x: labelW, y, width: plotW * s.mean, height: 18, fill: binColour(Math.min(Math.floor(s.mean * 10), 9), 10) });
        bar.append(shape("title", {}, `${s.evaluator}: mean ${s.mean.toFixed(3)}`));
        chart.append(bar);
      }
      chart.append(shape("text", { x: labelW + plotW + 6, y: y + 14 }, number(s.mean)));
    });
    return chart;
  }

  // ---- evals ----
  function evalRow(row) {
    const link = make("a", { class: "eval-row", href: "#/evals/" + encodeURIComponent(row.id) });
    if (row.error) {
      link.append(make("span", { class: "name", text: row.path }), make("span", { class: "error-row", text: short(row.error, 200) }));
      return make("li", {}, link);
    }
    link.append(
      make("span", { class: "agent", text: row.name || row.run_id }),
      make("span", { class: "status " + (row.passed ? "completed" : "failed"), text: row.passed ? "passed" : "failed" }),
      make("span", { text: `${row.passed_cases}/${row.cases} cases passed` }),
      make("span", { text: "mean " + number(row.mean) }),
      make("span", { class: "muted", text: when(row.started_at) }),
      make("span", { class: "name muted", text: `${row.mode}: ${row.path}` }),
    );
    return make("li", {}, link);
  }

  function caseItem(c) {
    const head = make("div", { class: "case-head" },
      make("span", { class: "case-id", text: c.id }),
      make("span", { class: "status " + ({ passed: "completed", skipped: "incomplete" }[c.status] || "failed"), text: c.status }));
    if (c.run) head.append(make("a", { class: "case-run", href: "#/run/" + encodeURIComponent(c.run), text: "open its run" }));
    else head.append(make("span", { class: "muted", text: "no trace saved" }));
    const body = make("div", { class: "case-body" });
    body.append(make("p", { text: "input: " + short(typeof c.input === "string" ? c.input : JSON.stringify(c.input), 300) }));
    if (c.final_output) body.append(make("p", { text: "output: " + short(c.final_output, 300) }));
    if (c.error) body.append(make("p", { class: "error-row", text: "error: " + short(c.error, 300) }));
    if (c.divergence) body.append(make("p", { class: "error-row", text: `diverged at step ${c.divergence.step}: ${c.divergence.headline}` }));
    const scores = make("ul", { class: "scores" });
    for (const s of c.scores || []) {
      scores.append(make("li", { text: `${s.evaluator}: ${s.outcome} (${number(s.value)})${s.reason ? " \u2014 " + short(s.reason, 200) : ""}` }));
    }
    if (scores.children.length) body.append(scores);
    return make("li", { class: "case", "data-status": c.status }, head, body);
  }

  async function showEvals(hash) {
    document.getElementById("evals-view").hidden = false;
    const status = document.getElementById("evals-status");
    const list = document.getElementById("evals");
    const page = document.getElementById("eval-page");
    list.replaceChildren();
    page.replaceChildren();
    const match = hash.match(/^#\/evals\/(.+)$/);
    try {
      if (!match) {
        const data = await getJson("api/evals");
        for (const row of data.evals) list.append(evalRow(row));
        status.textContent = data.evals.length ? `${data.evals.length} saved eval runs` : "no saved eval runs (start the studio with --evals DIR)";
        return;
      }
      status.textContent = "";
      const data = await getJson("api/evals/" + encodeURIComponent(decodeURIComponent(match[1])));
      const summary = data.summary || {};
      page.append(
        make("p", {}, make("a", { href: "#/evals", text: "\u2190 all eval runs" })),
        make("div", { class: "eval-head panel" },
          make("h1", { text: data.name || data.run_id }),
          make("span", { class: "status " + (data.passed ? "completed" : "failed"), text: data.passed ? "passed" : "failed" }),
          make("span", { text: `${summary.passed_cases}/${summary.cases} cases passed, ${summary.failed_cases} failed, ${summary.error_cases} errors, ${summary.diverged_cases} diverged` }),
          make("span", { text: "mean " + number(summary.mean) }),
          make("span", { class: "muted", text: `${data.mode}: ${data.path}, ${when(data.started_at)}` })),
        make("div", { class: "charts" },
          make("figure", {}, distributionChart(data.histogram), make("figcaption", { text: `score distribution (${data.scores} scores)` })),
          make("figure", {}, outcomesChart(data.stats || []), make("figcaption", { text: "outcomes per evaluator" })),
          make("figure", {}, meansChart(data.stats || []), make("figcaption", { text: "mean score per evaluator" }))),
      );
      const cases = make("ol", { class: "cases" });
      for (const c of data.cases) cases.append(caseItem(c));
      page.append(make("h2", { text: "cases" }), cases);
    } catch (error) {
      status.textContent = "cannot show the eval runs: " + error.message;
    }
  }

  // ---- sessions ----
  function itemText(item) {
    if (Array.isArray(item.content)) return item.content.map((part) => part.text ?? JSON.stringify(part)).join("");
    if (typeof item.content === "string") return item.content;
    if (item.name !== undefined) return `${item.name}(${item.arguments ?? ""})`;
    return JSON.stringify(item);
  }

  function roleOf(item) {
    switch (item.type) {
      case "UserMessage": return "user";
      case "AssistantMessage": return item.agent || "assistant";
      case "SystemMessage": return "system";
      default: return item.type || "item";
    }
  }

  function eventLine(event) {
    const at = event.at ? new Date(event.at).toISOString().replace("T", " ").slice(0, 19) : "";
    const rest = Object.fromEntries(Object.entries(event).filter(([key]) => key !== "type" && key !== "at"));
    return `${at} ${event.type}: ${short(JSON.stringify(rest), 300)}`;
  }

  async function showSessions(hash) {
    document.getElementById("sessions-view").hidden = false;
    const status = document.getElementById("sessions-status");
    const list = document.getElementById("sessions");
    const page = document.getElementById("session-page");
    list.replaceChildren();
    page.replaceChildren();
    const match = hash.match(/^#\/sessions\/(.+)$/);
    try {
      if (!match) {
        const data = await getJson("api/sessions");
        for (const row of data.sessions) {
          const link = make("a", { class: "session-row", href: "#/sessions/" + encodeURIComponent(row.id) },
            make("span", { class: "agent", text: row.id }),
            make("span", { text: `${row.events} events` }),
            make("span", { class: "muted", text: row.last_at ? "last " + when(row.last_at) : "" }));
          list.append(make("li", {}, link));
        }
        status.textContent = `${data.sessions.length} sessions (${data.backend} backend)`;
        return;
      }
      status.textContent = "";
      const id = decodeURIComponent(match[1]);
      const data = await getJson("api/sessions/" + id.split("/").map(encodeURIComponent).join("/"));
      const items = make("ol", { class: "items" });
      for (const item of data.items) {
        const role = roleOf(item);
        items.append(make("li", { class: "item", "data-type": String(item.type || "") },
          make("span", { class: "role", text: role + ": " }), make("span", { text: short(itemText(item), 2000) })));
      }
      const events = make("ol", { class: "session-events" });
      for (const event of data.events) events.append(make("li", { text: eventLine(event) }));
      page.append(
        make("p", {}, make("a", { href: "#/sessions", text: "\u2190 all sessions" })),
        make("div", { class: "panel session-head" }, make("h1", { text: "session " + data.id }),
          make("span", { class: "muted", text: `${data.events.length} events, ${data.items.length} items (${data.backend})` })),
        make("h2", { text: "conversation (what its next run starts from)" }), items,
        make("details", { class: "log" }, make("summary", { text: "the event log" }), events),
      );
    } catch (error) {
      status.textContent = "cannot show the sessions: " + error.message;
    }
  }

  // studio.js's view registry: [hash prefix, show(hash)].
  window.studioViews = window.studioViews || [];
  window.studioViews.push(["#/evals", showEvals], ["#/sessions", showSessions]);
})();
