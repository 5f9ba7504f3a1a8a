// helikon studio: time travel. The machine state after a step, forks (an edited
// answer or user message, replayed or live), and the diff of two runs.
// Every string from a run is set with textContent, never parsed as HTML.
"use strict";

(() => {
  const base = () => new URL(".", document.baseURI);
  const url = (path) => new URL(path, base());

  const make = el; // dom.js

  async function call(path, options) {
    const response = await fetch(url(path), options);
    const data = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error((data.error && data.error.message) || `HTTP ${response.status}`);
    return data;
  }

  // ---- a collapsible JSON tree ----
  function scalar(value) {
    return make("span", { class: "json-" + (value === null ? "null" : typeof value), text: JSON.stringify(value) });
  }

  function jsonTree(value, key, depth) {
    const label = key === null ? "" : `${key}: `;
    if (value === null || typeof value !== "object") {
      return make("li", { class: "json-leaf" }, make("span", { class: "json-key", text: label }), scalar(value));
    }
    const entries = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
    const size = Array.isArray(value) ? `[${entries.length}]` : `{${entries.length}}`;
    const box = make("details", { class: "json-node" },
      make("summary", {}, make("span", { class: "json-key", text: label }), make("span", { class: "muted", text: size })));
    if (depth < 2) box.open = true;
    let filled = false;
    const fill = () => {
      if (filled || !box.open) return;
      filled = true;
      const list = make("ul", { class: "json-tree" });
      for (const [k, v] of entries) list.append(jsonTree(v, k, depth + 1));
      box.append(list);
    };
    box.addEventListener("toggle", fill);
    fill();
    return make("li", { class: "json-branch" }, box);
  }

  function stateView(runId, step) {
    const holder = make("div", { class: "state-view" }, make("p", { class: "muted", text: "computing the state\u2026" }));
    call(`api/runs/${encodeURIComponent(runId)}/state/${step}`).then((data) => {
      const tree = make("ul", { class: "json-tree root" }, jsonTree(data.snapshot.state, null, 0));
      const title = step < 0 ? "machine state before the first step" : `machine state after step #${step}`;
      holder.replaceChildren(make("h3", { text: title }), tree);
    }).catch((error) => holder.replaceChildren(make("p", { class: "error-row", text: error.message })));
    return holder;
  }

  // ---- the fork form ----
  function modeChoice(name) {
    const box = make("div", { class: "fork-mode" });
    for (const [value, text] of [["replay", "replay what does not depend on the edit"], ["live", "live from here"]]) {
      const input = make("input", { type: "radio", name, value });
      if (value === "replay") input.checked = true;
      box.append(make("label", {}, input, " " + text));
    }
    return box;
  }

  function forkForm(runId, step, value, what) {
    const name = `fork-mode-${step === null ? "input" : step}`;
    const area = make("textarea", { class: "fork-edit", rows: "10", spellcheck: "false", "aria-label": what });
    area.value = typeof value === "string" ? value : JSON.stringify(value, null, 2);
    const status = make("p", { class: "fork-status", role: "status" });
    const run = make("button", { type: "button", class: "fork-run", text: "Run the fork" });
    const form = make("div", { class: "fork-form" }, make("h3", { text: what }), area, modeChoice(name), run, status);
    run.addEventListener("click", async () => {
      const mode = form.querySelector(`input[name="${name}"]:checked`).value;
      let body;
      try {
        body = step === null ? { step: null, input: area.value, mode } : { step, answer: JSON.parse(area.value), mode };
      } catch (error) {
        status.textContent = "the edited answer is not JSON: " + error.message;
        return;
      }
      run.disabled = true;
      status.textContent = "running the fork\u2026";
      try {
        const made = await call(`api/runs/${encodeURIComponent(runId)}/fork`, {
          method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
        });
        location.hash = "#/run/" + encodeURIComponent(made.id);
      } catch (error) {
        status.textContent = "the fork failed: " + error.message;
        run.disabled = false;
      }
    });
    return form;
  }

  function stepTools(runId, node, forkable) {
    const tools = make("div", { class: "fork-tools" });
    const stateButton = make("button", { type: "button", class: "show-state", text: "Machine state after this step" });
    const forkButton = make("button", { type: "button", class: "fork-here", text: "Fork from here" });
    let state = null, form = null;
    stateButton.addEventListener("click", () => {
      if (state) { state.remove(); state = null; return; }
      state = stateView(runId, node.index);
      tools.after(state);
    });
    forkButton.addEventListener("click", () => {
      if (form) { form.remove(); form = null; return; }
      form = forkForm(runId, node.index, node.result, `edit what came back at step #${node.index} (${node.result_type})`);
      (state || tools).after(form);
    });
    tools.append(stateButton);
    if (forkable) tools.append(forkButton);
    return tools;
  }

  // ---- marks: how each step of a fork was answered ----
  function badge(how) {
    return make("span", { class: `mark ${how}`, text: how, title: `this step was ${how}` });
  }

  function markParts(item, mark) {
    for (const part of mark.parts || []) {
      const child = item.querySelector(`.children > li.step[data-path="${CSS.escape(part.path.join("/"))}"] > details > summary`);
      if (child && !child.querySelector(".mark")) child.append(" ", badge(part.how));
    }
  }

  function forkInfo(id, lineage) {
    const info = make("div", { id: "fork-info" });
    const fork = lineage.fork;
    if (lineage.parent && fork) {
      const parent = make("a", { href: "#/run/" + encodeURIComponent(lineage.parent.id), text: lineage.parent.name });
      const at = fork.step === null ? "with another user message" : `at step #${fork.step} (${fork.edited} edited)`;
      info.append(make("p", { class: "lineage" }, "Fork of ", parent, ` ${at}, ${fork.mode} mode. `,
        make("a", { class: "diff-parent", href: `#/diff/${encodeURIComponent(lineage.parent.id)}/${encodeURIComponent(id)}`, text: "Diff with its parent" })));
      if (fork.divergences.length) {
        const list = make("ul", { class: "divergences" });
        for (const d of fork.divergences) {
          const item = make("li", {}, make("p", { text: d.message }));
          const paths = make("ul", { class: "paths" });
          for (const line of d.differences.slice(0, 20)) paths.append(make("li", {}, make("code", { text: line.path }), " " + line.text));
          if (d.differences.length) item.append(paths);
          list.append(item);
        }
        info.append(make("h3", { text: "where it left the recording (it continued live)" }), list);
      } else if (fork.mode === "replay") {
        info.append(make("p", { class: "muted", text: "It never left the recording: every step after the edit was replayed." }));
      }
    }
    if (lineage.children.length) {
      const list = make("p", { class: "children-forks" }, "Forks of this run: ");
      lineage.children.forEach((child, n) => {
        if (n) list.append(", ");
        list.append(make("a", { href: "#/run/" + encodeURIComponent(child.id), text: child.name }));
      });
      info.append(list);
    }
    if (!lineage.forkable) info.append(make("p", { class: "muted", text: lineage.reason }));
    info.append(make("p", {}, make("a", { class: "compare", href: `#/diff/${encodeURIComponent(id)}/`, text: "Compare with another run" })));
    return info;
  }

  document.addEventListener("studio:run", async (event) => {
    const { id, data } = event.detail;
    const view = document.getElementById("run-view");
    const old = document.getElementById("fork-info");
    if (old) old.remove();
    let lineage;
    try {
      lineage = await call(`api/runs/${encodeURIComponent(id)}/lineage`);
    } catch (error) {
      return;
    }
    if (!location.hash.endsWith(encodeURIComponent(id))) return; // another run is shown by now
    document.getElementById("run-input").after(forkInfo(id, lineage));
    const marks = new Map(((lineage.fork && lineage.fork.marks) || []).map((m) => [m.index, m]));
    const byIndex = new Map(data.steps.map((node) => [String(node.index), node]));
    for (const item of view.querySelectorAll("#timeline > li.step[data-index]")) {
      const node = byIndex.get(item.dataset.index);
      const box = item.querySelector(":scope > details");
      const mark = marks.get(node.index);
      if (mark) box.querySelector(":scope > summary").append(" ", badge(mark.how));
      let added = false;
      box.addEventListener("toggle", () => {
        if (!box.open || added) return;
        added = true;
        const body = box.querySelector(":scope > .body");
        if (body) body.prepend(stepTools(id, node, lineage.forkable));
        if (mark) markParts(item, mark);
      });
    }
    if (lineage.forkable) {
      const input = document.getElementById("run-input");
      const text = data.input.map((item) => (Array.isArray(item.content) ? item.content.map((p) => p.text || "").join("") : "")).join("\n");
      const tools = make("div", { class: "fork-tools" });
      const stateButton = make("button", { type: "button", class: "show-state", text: "Machine state at the start" });
      const forkButton = make("button", { type: "button", class: "fork-input", text: "Fork with another message" });
      let state = null, form = null;
      stateButton.addEventListener("click", () => {
        if (state) { state.remove(); state = null; return; }
        state = stateView(id, -1); tools.after(state);
      });
      forkButton.addEventListener("click", () => {
        if (form) { form.remove(); form = null; return; }
        form = forkForm(id, null, text, "edit the user's message"); (state || tools).after(form);
      });
      tools.append(stateButton, forkButton);
      input.append(tools);
    }
  });

  // ---- the diff of two runs ----
  function diffSection(title, lines) {
    const section = make("section", { class: "diff-part" }, make("h3", { text: `${title}: ${lines.length ? lines.length + " difference(s)" : "the same"}` }));
    if (lines.length) {
      const list = make("ul", { class: "paths" });
      for (const line of lines.slice(0, 200)) list.append(make("li", {}, make("code", { text: line.path }), " " + line.text));
      section.append(list);
    }
    return section;
  }

  function runLabel(run) {
    return `${run.agent || "?"} \u2014 ${run.source}: ${run.name}`;
  }

  async function showDiff(hash) {
    document.getElementById("diff-view").hidden = false;
    const [, a = "", b = ""] = (hash.match(/^#\/diff\/?([^/]*)\/?([^/]*)$/) || []).map(decodeURIComponent);
    const result = document.getElementById("diff-result");
    result.replaceChildren();
    let runs = [];
    try {
      runs = (await call("api/runs")).runs.filter((run) => !run.error);
    } catch (error) {
      result.replaceChildren(make("p", { class: "error-row", text: error.message }));
      return;
    }
    for (const [select, chosen] of [[document.getElementById("diff-a"), a], [document.getElementById("diff-b"), b]]) {
      select.replaceChildren(make("option", { value: "", text: "\u2014 choose a run \u2014" }));
      for (const run of runs) select.append(make("option", { value: run.id, text: runLabel(run) }));
      select.value = runs.some((run) => run.id === chosen) ? chosen : "";
    }
    if (!a || !b) return;
    result.append(make("p", { class: "muted", text: "comparing\u2026" }));
    try {
      const data = await call(`api/diff?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`);
      const head = make("div", { class: "diff-head" },
        make("p", {}, "A: ", make("a", { href: "#/run/" + encodeURIComponent(a), text: runLabel(data.a) })),
        make("p", {}, "B: ", make("a", { href: "#/run/" + encodeURIComponent(b), text: runLabel(data.b) })),
        make("p", { class: "verdict " + (data.same ? "same" : "differ"), text: data.same ? "The two runs are the same." : "The two runs differ." }));
      const outputs = make("div", { class: "outputs" },
        make("div", { class: "output a" }, make("h3", { text: "final output of A" }), make("p", { text: data.output.a ?? "(none)" })),
        make("div", { class: "output b" }, make("h3", { text: "final output of B" }), make("p", { text: data.output.b ?? "(none)" })));
      result.replaceChildren(head, outputs, diffSection("final output", data.output.differences),
        diffSection("events", data.events), diffSection("steps (effects and results)", data.steps));
    } catch (error) {
      result.replaceChildren(make("p", { class: "error-row", text: error.message }));
    }
  }

  window.studioViews = window.studioViews || [];
  window.studioViews.push(["#/diff", showDiff]);
  // a run's lineage belongs to that run: gone as soon as the page shows another
  window.addEventListener("hashchange", () => {
    const old = document.getElementById("fork-info");
    if (old) old.remove();
  });

  document.addEventListener("DOMContentLoaded", () => {
    document.getElementById("diff-go").addEventListener("click", () => {
      const a = document.getElementById("diff-a").value, b = document.getElementById("diff-b").value;
      const target = `#/diff/${encodeURIComponent(a)}/${encodeURIComponent(b)}`;
      if (location.hash === target) showDiff(target);
      else location.hash = target;
    });
  });
})();
