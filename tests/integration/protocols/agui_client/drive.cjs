// Drives a helikon AG-UI endpoint with the official @ag-ui/client (HttpAgent):
// a tool call, a front-end tool the client runs, an approval answered with resume.
// Usage: node drive.cjs <endpoint url>; prints one JSON line per scenario.
const { HttpAgent, buildResumeArray } = require("@ag-ui/client");

const url = process.argv[2];
const out = (name, value) => console.log(JSON.stringify({ scenario: name, ...value }));
const types = [];
const seen = { onEvent: ({ event }) => { types.push(event.type); } };

function lastAssistantText(agent) {
  const texts = agent.messages.filter((m) => m.role === "assistant" && m.content).map((m) => m.content);
  return texts[texts.length - 1];
}

async function toolCall() {
  const agent = new HttpAgent({ url, threadId: "npm-1" });
  agent.addMessage({ id: "u1", role: "user", content: "weather please" });
  const { result } = await agent.runAgent({ runId: "r1" }, seen);
  const call = agent.messages.find((m) => m.role === "assistant" && m.toolCalls && m.toolCalls.length);
  const toolMessage = agent.messages.find((m) => m.role === "tool");
  out("tool_call", {
    tool: call.toolCalls[0].function.name,
    toolResult: toolMessage && toolMessage.content,
    answer: lastAssistantText(agent),
    result,
  });
}

async function frontendTool() {
  const tools = [{
    name: "where_am_i",
    description: "Where the user is, from the browser.",
    parameters: { type: "object", properties: { precision: { type: "string" } } },
  }];
  const agent = new HttpAgent({ url, threadId: "npm-2" });
  agent.addMessage({ id: "u1", role: "user", content: "locate me" });
  await agent.runAgent({ runId: "r1", tools }, seen);
  const call = agent.messages.find((m) => m.role === "assistant" && m.toolCalls && m.toolCalls.length).toolCalls[0];
  // The front end runs its tool and answers with a tool message.
  const args = JSON.parse(call.function.arguments);
  agent.addMessage({ id: "t1", role: "tool", toolCallId: call.id, content: `Lyon (${args.precision})` });
  const { result } = await agent.runAgent({ runId: "r2", tools }, seen);
  out("frontend_tool", { tool: call.function.name, answer: lastAssistantText(agent), result });
}

async function approval() {
  const agent = new HttpAgent({ url, threadId: "npm-3" });
  agent.addMessage({ id: "u1", role: "user", content: "pay 5" });
  const custom = [];
  await agent.runAgent({ runId: "r1" }, { onCustomEvent: ({ event }) => { custom.push(event); } });
  const pending = agent.pendingInterrupts.map((i) => ({ id: i.id, reason: i.reason, toolCallId: i.toolCallId }));
  const responses = {};
  for (const interrupt of agent.pendingInterrupts) {
    responses[interrupt.id] = { status: "resolved", payload: { approved: true } };
  }
  const resume = buildResumeArray(agent.pendingInterrupts, responses);
  const { result } = await agent.runAgent({ runId: "r2", resume }, seen);
  const toolMessage = agent.messages.find((m) => m.role === "tool");
  out("approval", {
    custom: custom.map((e) => e.name),
    pending,
    toolResult: toolMessage && toolMessage.content,
    result,
    left: agent.pendingInterrupts.length,
  });
}

(async () => {
  await toolCall();
  await frontendTool();
  await approval();
  out("events", { types: [...new Set(types)].sort() });
})().catch((error) => {
  console.error(error && error.stack ? error.stack : error);
  process.exit(1);
});
