// helikon studio. Every string from a run is set with textContent, never parsed as HTML.
"use strict";

// api() and el() come from dom.js.

function json(value) {
  return el("pre", { text: JSON.stringify(value, null, 2) });
}

function short(text, limit) {
  text = String(text ?? "");
  return text.length > limit ? text.slice(0, limit - 1) + "\u2026" : text;
}

function textOf(item) {
  if (!item) return "";
  if (Array.isArray(item.content)) return item.content.map((part) => part.text || "").join("");
  if (typeof item.content === "string") return item.content;
  return item.type || "";
}

// ---- the run list ----
let allRuns = [];

function tokens(run) {
  if (run.input_tokens == null) return "\u2014";
  return `${run.input_tokens} in / ${run.output_tokens} out`;
}

function runRow(run) {
  const link = el("a", { class: "run-row", href: "#/run/" + encodeURIComponent(run.id) });
  if (run.error) {
    link.append(el("span", { class: "name", text: `${run.source}: ${run.name}` }),
      el("span", { class: "error-row", text: short(run.error, 200) }));
    return el("li", { "data-search": `${run.source} ${run.name} error` }, link);
  }
  link.append(
    el("span", { class: "agent", text: run.agent }),
    el("span", { class: "status " + run.status, text: run.status }),
    el("span", { class: "turns", text: `${run.turns} turns` }),
    el("span", { class: "tokens", text: tokens(run) }),
    el("span", { class: "time muted", text: run.time.slice(0, 16).replace("T", " "), title: run.time }),
    el("span", { class: "name muted", text: `${run.source}: ${run.name}` }),
  );
  const search = `${run.agent} ${run.status} ${run.source} ${run.name} ${run.run_id}`.toLowerCase();
  return el("li", { "data-search": search }, link);
}

function showRuns() {
  const query = document.getElementById("filter").value.trim().toLowerCase();
  const list = document.getElementById("runs");
  list.replaceChildren();
  const shown = allRuns.filter((run) => !query || runRow(run).dataset.search.includes(query));
  for (const run of shown) list.append(runRow(run));
  document.getElementById("runs-status").textContent =
    allRuns.length ? `${shown.length} of ${allRuns.length} runs` : "no runs yet";
}

async function loadRuns() {
  const status = document.getElementById("runs-status");
  try {
    const response = await fetch(api("api/runs"));
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const data = await response.json();
    allRuns = data.runs;
    document.getElementById("nav-chat").hidden = data.agents.length === 0;
    showRuns();
  } catch (error) {
    status.textContent = "cannot list the runs: " + error.message;
  }
}

// ---- one run ----
function effectLabel(node) {
  const effect = node.effect;
  switch (node.effect_type) {
    case "CallModel": return `CallModel turn ${effect.turn}`;
    case "ExecuteTools": {
      const tools = (effect.steps || []).filter((s) => s.type === "InvokeTool").map((s) => s.tool);
      return "ExecuteTools " + (tools.length ? tools.join(", ") : `(${(effect.steps || []).length} steps)`);
    }
    case "PerformAll": return `PerformAll (${node.children.length} agents)`;
    default: return node.effect_type;
  }
}

function eventLine(event) {
  switch (event.type) {
    case "RunStarted": return `run started: ${event.agent} (${event.run_id})`;
    case "ToolCallItem": return `\u2192 ${event.item.name}(${short(event.item.arguments, 120)})`;
    case "ToolOutputItem": return `${event.item.is_error ? "\u2717" : "\u2190"} ${event.item.name}: ${short(event.item.content, 120)}`;
    case "MessageOutput": return `${event.item.agent || "assistant"}: ${short(textOf(event.item), 200)}`;
    case "HandoffItem": return `\u21e2 handoff: ${event.from_agent} -> ${event.to_agent}`;
    case "AgentUpdated": return `agent now: ${event.agent}`;
    case "ApprovalRequested": return `approval requested: ${event.tool}`;
    case "PermissionDenied": return `denied: ${event.tool}: ${event.reason}`;
    case "GuardrailTriggered": return `guardrail ${event.kind}: ${event.info}`;
    case "RunCompleted": return `run completed (${event.usage.input_tokens} tokens in, ${event.usage.output_tokens} out)`;
    case "RunFailed": return `run failed: ${short(JSON.stringify(event.error), 200)}`;
    default: return null;
  }
}

function eventList(events) {
  const list = el("ul", { class: "events" });
  for (const event of events) {
    const line = eventLine(event);
    if (line !== null) list.append(el("li", { text: line }));
  }
  return list.children.length ? list : null;
}

function usageOf(value, total) {
  if (Array.isArray(value)) value.forEach((v) => usageOf(v, total));
  else if (value && typeof value === "object") {
    if (typeof value.input_tokens === "number" && typeof value.output_tokens === "number") {
      total.input += value.input_tokens; total.output += value.output_tokens; total.found = true;
      return;
    }
    Object.values(value).forEach((v) => usageOf(v, total));
  }
  return total;
}

function modelText(result) {
  const chunks = (result && result.events) || [];
  return chunks.filter((c) => typeof c.text === "string").map((c) => c.text).join("");
}

function rest(value, ...drop) {
  const shown = Object.fromEntries(Object.entries(value || {}).filter(([key]) => !drop.includes(key)));
  return Object.keys(shown).length ? " " + JSON.stringify(shown) : "";
}

// Governance decisions: the permission policy's and hooks' answers, approvals, denials, guardrails.
function governance(node) {
  const lines = [];
  const result = node.result || {};
  for (const answer of result.results || []) {
    if (answer.type === "PolicyAnswered") {
      const decision = answer.decision || {};
      lines.push(`policy on ${answer.call_id}: ${decision.type}${rest(decision, "type")}`);
    } else if (answer.type === "HookAnswered") {
      const decision = answer.decision || { type: "no decision" };
      lines.push(`hook on ${answer.call_id}: ${decision.type}${rest(decision, "type")}`);
    }
  }
  for (const decision of result.decisions || []) {
    const why = decision.reason ? `: ${decision.reason}` : "";
    lines.push(`approval of ${decision.call_id}: ${decision.approved ? "approved" : "denied"}${why}`);
  }
  for (const event of node.events || []) {
    if (["PermissionDenied", "ApprovalRequested", "GuardrailTriggered"].includes(event.type)) {
      lines.push(eventLine(event));
    }
  }
  if (!lines.length) return null;
  const list = el("ul", { class: "events governance" });
  for (const line of lines) list.append(el("li", { text: line }));
  return list;
}

function details(node) {
  const body = el("div", { class: "body" });
  const effect = node.effect, result = node.result;
  if (node.effect_type === "CallModel") {
    body.append(el("h3", { text: "model request" }), json(effect.request));
    const said = modelText(result);
    body.append(el("h3", { text: "model response" }));
    if (said) body.append(el("p", { class: "said", text: said }));
    body.append(json(result));
  } else if (node.effect_type === "ExecuteTools") {
    body.append(el("h3", { text: "tool calls" }));
    for (const step of effect.steps || []) {
      body.append(el("p", { text: `${step.tool || step.type} (${step.call_id || ""})` }), json(step.args ?? step));
    }
    body.append(el("h3", { text: "tool results" }), json(result));
  } else if (node.effect_type !== "PerformAll") {
    body.append(el("h3", { text: "effect" }), json(effect), el("h3", { text: "result" }), json(result));
  }
  const usage = usageOf(result, { input: 0, output: 0, found: false });
  if (usage.found) body.append(el("p", { class: "tokens", text: `tokens: ${usage.input} in, ${usage.output} out` }));
  if (node.now != null) {
    const took = node.elapsed != null ? `, ${node.elapsed.toFixed(3)} s after the previous step` : "";
    body.append(el("p", { class: "timing", text: `clock: ${node.now}${took}` }));
  }
  const ruled = governance(node);
  if (ruled) body.append(el("h3", { text: "governance" }), ruled);
  const events = eventList(node.events || []);
  if (events) body.append(el("h3", { text: "events" }), events);
  if (node.children.length) {
    const children = el("ol", { class: "children" });
    for (const child of node.children) children.append(stepItem(child, null));
    body.append(children);
  }
  return body;
}

function stepItem(node, index) {
  const summary = el("summary");
  if (index !== null) summary.append(`#${index} `);
  if (node.path.length) summary.append(el("span", { class: "path", text: node.path.join("/") }), " ");
  summary.append(`${effectLabel(node)} \u2192 ${node.result_type || "(no result)"}`);
  const said = node.effect_type === "CallModel" ? modelText(node.result) : "";
  if (said) summary.append(el("span", { class: "muted", text: " \u2014 " + short(said, 80) }));
  const box = el("details", {}, summary);
  let filled = false;
  box.addEventListener("toggle", () => {
    if (box.open && !filled) { box.append(details(node)); filled = true; }
  });
  const item = el("li", { class: "step", "data-path": node.path.join("/") }, box);
  if (index !== null) item.dataset.index = String(index);
  item.dataset.search = JSON.stringify([node.effect, node.result, node.events]).toLowerCase();
  return item;
}

async function showRun(id) {
  const head = document.getElementById("run-head");
  const timeline = document.getElementById("timeline");
  head.replaceChildren(el("p", { text: "loading\u2026" }));
  timeline.replaceChildren();
  document.getElementById("run-input").replaceChildren();
  document.getElementById("run-search").value = "";
  const response = await fetch(api("api/runs/" + encodeURIComponent(id)));
  const data = await response.json();
  if (!response.ok) {
    head.replaceChildren(el("p", { class: "error-row", text: data.error.message }));
    return;
  }
  const run = data.run;
  head.replaceChildren(
    el("h1", { text: `${run.agent} \u2014 ${run.run_id}` }),
    el("span", { class: "status " + run.status, text: run.status }),
    el("span", { text: `${run.steps} steps, ${run.turns} turns` }),
    el("span", { text: "tokens: " + tokens(run) }),
    el("span", { class: "muted", text: `${run.source}: ${run.name}` }),
    el("span", { class: "muted", text: run.time }),
  );
  const input = document.getElementById("run-input");
  for (const item of data.input) input.append(el("p", { text: "input: " + textOf(item) }));
  const start = eventList(data.start);
  if (start) timeline.append(el("li", { class: "step start" }, start));
  data.steps.forEach((node) => timeline.append(stepItem(node, node.index)));
  const end = eventList(data.end);
  if (end) timeline.append(el("li", { class: "step end" }, end));
  document.dispatchEvent(new CustomEvent("studio:run", { detail: { id, data } }));
}

function searchRun() {
  const query = document.getElementById("run-search").value.trim().toLowerCase();
  for (const item of document.querySelectorAll("#timeline > li.step[data-search]")) {
    item.classList.toggle("hidden-by-search", Boolean(query) && !item.dataset.search.includes(query));
  }
}

// Other views (fork.js: the diff) register [hash prefix, show(hash)] here.
window.studioViews = window.studioViews || [];

function route() {
  const view = window.studioViews.find(([prefix]) => location.hash.startsWith(prefix));
  for (const section of document.querySelectorAll("main > section")) section.hidden = true;
  if (view) { view[1](location.hash); return; }
  const match = location.hash.match(/^#\/run\/(.+)$/);
  document.getElementById("runs-view").hidden = Boolean(match);
  document.getElementById("run-view").hidden = !match;
  if (match) showRun(decodeURIComponent(match[1]));
  else loadRuns();
}

document.getElementById("filter").addEventListener("input", showRuns);
document.getElementById("refresh").addEventListener("click", loadRuns);
document.getElementById("run-search").addEventListener("input", searchRun);
window.addEventListener("hashchange", route);
route();
