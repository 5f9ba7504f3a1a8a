// helikon studio: the regression view. Replays the open run against the current
// code and shows the first divergence in place, on the run's timeline.
// Every string is set with textContent, never parsed as HTML.
"use strict";

(function () {

  const make = el; // dom.js

  function runId() {
    const match = location.hash.match(/^#\/run\/(.+)$/);
    return match ? decodeURIComponent(match[1]) : null;
  }

  function clear() {
    document.getElementById("replay-result").replaceChildren();
    for (const node of document.querySelectorAll("#timeline .divergence-here")) node.remove();
    for (const node of document.querySelectorAll("#timeline .diverged")) node.classList.remove("diverged");
  }

  // The ReplayDivergence field paths, expected (recorded) beside actual (this run).
  function fields(differences) {
    const list = make("dl", { class: "fields" });
    for (const d of differences) {
      const row = make("div", { class: "field" });
      if (d.path === null) {
        row.append(make("dt", { text: "difference" }), make("dd", { class: "line", text: d.line }));
      } else {
        row.append(
          make("dt", { class: "field-path", text: d.path }),
          make("dd", { class: "expected" }, make("span", { class: "muted", text: "expected " }),
            make("code", { text: d.expected === null ? "(nothing)" : d.expected })),
          make("dd", { class: "actual" }, make("span", { class: "muted", text: "actual " }),
            make("code", { text: d.actual === null ? "(nothing)" : d.actual })),
        );
      }
      list.append(row);
    }
    return list;
  }

  function stepAt(index) {
    const found = document.querySelector(`#timeline > li.step[data-index="${CSS.escape(String(index))}"]`);
    if (found) return found;
    if (index < 0) return null;
    // Past the recording's last step: the run ended differently (its events, or one step too many).
    let end = document.querySelector("#timeline > li.step.end");
    if (!end) {
      end = make("li", { class: "step end" });
      document.getElementById("timeline").append(end);
    }
    return end;
  }

  function markDivergence(answer) {
    const item = stepAt(answer.step);
    if (!item) return null;
    item.classList.add("diverged");
    const box = make("div", { class: "divergence-here" },
      make("p", { class: "headline", text: `diverged here (step ${answer.step}, ${answer.mode} replay): ${answer.headline.replace(/^replay diverged at step -?\d+: /, "")}` }));
    if (answer.differences.length) box.append(fields(answer.differences));
    item.append(box);
    return item;
  }

  async function replay() {
    const id = runId();
    if (!id) return;
    clear();
    const result = document.getElementById("replay-result");
    const mode = document.getElementById("replay-mode").value;
    const button = document.getElementById("replay");
    button.disabled = true;
    result.replaceChildren(make("p", { text: "replaying\u2026" }));
    let answer;
    try {
      const response = await fetch(api("api/runs/" + encodeURIComponent(id) + "/replay"), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ mode }),
      });
      answer = await response.json();
      if (!response.ok) throw new Error(answer.error ? answer.error.message : `HTTP ${response.status}`);
    } catch (error) {
      result.replaceChildren(make("p", { class: "replay-error", text: "cannot replay: " + error.message }));
      return;
    } finally {
      button.disabled = false;
    }
    const shown = [];
    if (answer.outcome === "matches") {
      shown.push(make("p", { class: "replay-ok", text: `\u2713 ${answer.message} (${answer.mode}, agent ${answer.agent})` }));
    } else if (answer.outcome === "diverged") {
      shown.push(make("p", { class: "replay-diverged", text: `\u2717 ${answer.headline}` }));
      const item = markDivergence(answer);
      if (item) {
        const link = make("a", { href: "#", class: "to-divergence", text: "show the step" });
        link.addEventListener("click", (event) => { event.preventDefault(); item.scrollIntoView({ block: "center" }); });
        shown.push(make("p", {}, link));
        item.scrollIntoView({ block: "center" });
      }
    } else {
      shown.push(make("p", { class: "replay-error", text: answer.message }));
    }
    for (const warning of answer.warnings || []) shown.push(make("p", { class: "replay-warning", text: "warning: " + warning }));
    if (answer.record_command) {
      shown.push(make("p", { class: "record" }, "This is a golden trace; if the change is intended, re-record it: ",
        make("code", { class: "record-command", text: answer.record_command })));
    }
    result.replaceChildren(...shown);
  }

  document.getElementById("replay").addEventListener("click", replay);
  window.addEventListener("hashchange", clear);
})();
