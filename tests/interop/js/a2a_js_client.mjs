// Drive an A2A server with the @a2a-js/sdk client and print, as JSON, how the client took
// every answer. Run from this folder after `npm ci`:
//
//   node a2a_js_client.mjs 03|13 < plan.json
//
// 03 is @a2a-js/sdk 0.3 (A2A 0.3, the service's protocol); 13 is @a2a-js/sdk 1.3 (A2A 1.0)
// with its v0.3 compat layer turned on, as a 1.x user must do to reach a 0.3 server.
//
// stdin: {"origin": "http://127.0.0.1:<port>", "token": "...", "steps": [...]}; each step is
//   {"label", "call": "send", "skill": <skillId or null>, "parts": [<A2A 0.3 parts>]}
//   {"label", "call": "get" | "cancel", "id": "<task id>" | {"task_of": "<label>"}}
// with an optional "token" overriding the plan's for that step (its own client).
// stdout: {"sdk": "<version>", "card": <outcome>, "steps": {label: <outcome>}}, an outcome
// being {"kind": "task", "id", "contextId", "state", "statusText", "artifacts": [{name,
// parts: [{kind, text | data}]}]}, {"kind": "card", "skills": [ids]} or {"kind": "error",
// "type", "name", "message", "code", "data"} (the error the client raised; code and data
// are the JSON-RPC error's when the client kept them).

import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";

const which = process.argv[2];
if (which !== "03" && which !== "13") {
  console.error("usage: node a2a_js_client.mjs 03|13 < plan.json");
  process.exit(2);
}
const pkg = `a2a-js-${which}`;
const sdk = await import(`${pkg}/client`);
const manifest = new URL(`./node_modules/${pkg}/package.json`, import.meta.url);
const version = JSON.parse(readFileSync(manifest, "utf8")).version;

// The v1.0 task states (a protobuf enum) by number, as their v0.3 names.
const V1_STATES = {
  0: "unknown", 1: "submitted", 2: "working", 3: "completed", 4: "failed",
  5: "canceled", 6: "input-required", 7: "rejected", 8: "auth-required",
};

function v1Part(part) {
  if (part.kind === "text") {
    return { content: { $case: "text", value: part.text }, metadata: undefined, filename: "", mediaType: "" };
  }
  return { content: { $case: "data", value: part.data }, metadata: undefined, filename: "", mediaType: "" };
}

function summaryPart(part) {
  if (part.kind !== undefined) {
    return part.kind === "text" ? { kind: "text", text: part.text } : { kind: part.kind, data: part.data };
  }
  const content = part.content ?? {};
  return content.$case === "text" ? { kind: "text", text: content.value } : { kind: content.$case, data: content.value };
}

function taskOutcome(task) {
  const state = typeof task.status.state === "number" ? V1_STATES[task.status.state] : task.status.state;
  const message = task.status.message;
  return {
    kind: "task",
    id: task.id,
    contextId: task.contextId,
    state,
    statusText: message ? message.parts.map(summaryPart).map((p) => p.text).join("") : null,
    artifacts: (task.artifacts ?? []).map((a) => ({ name: a.name, parts: a.parts.map(summaryPart) })),
  };
}

function errorOutcome(error) {
  const rpc = error.errorResponse?.error;
  return {
    kind: "error",
    type: error.constructor?.name ?? typeof error,
    name: error.name,
    message: String(error.message ?? error),
    code: error.envelopeCode ?? rpc?.code ?? null,
    data: error.data ?? rpc?.data ?? null,
  };
}

function bearerFetch(token) {
  return sdk.createAuthenticatingFetchWithRetry(fetch, {
    headers: async () => ({ Authorization: `Bearer ${token}` }),
    shouldRetryWithHeaders: async () => undefined,
  });
}

async function makeClient(origin, token) {
  const fetchImpl = bearerFetch(token);
  const { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } = sdk;
  const overrides = which === "03"
    ? { transports: [new JsonRpcTransportFactory({ fetchImpl })] }
    : {
        transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } })],
        cardResolver: new sdk.DefaultAgentCardResolver({ legacyCompat: { enabled: true } }),
      };
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, overrides));
  return factory.createFromUrl(origin);
}

function sendParams(step) {
  const metadata = step.skill == null ? undefined : { skillId: step.skill };
  if (which === "03") {
    return { message: { kind: "message", role: "user", messageId: randomUUID(), parts: step.parts, metadata } };
  }
  const message = {
    messageId: randomUUID(), contextId: "", taskId: "", role: 1, parts: step.parts.map(v1Part),
    metadata, extensions: [], referenceTaskIds: [],
  };
  return { tenant: "", message, configuration: undefined, metadata: undefined };
}

async function main() {
  let input = "";
  for await (const chunk of process.stdin) input += chunk;
  const plan = JSON.parse(input);
  const clients = new Map();
  const clientFor = async (token) => {
    if (!clients.has(token)) clients.set(token, await makeClient(plan.origin, token));
    return clients.get(token);
  };
  const report = { sdk: version, card: null, steps: {} };
  try {
    const card = await (await clientFor(plan.token)).getAgentCard();
    report.card = { kind: "card", skills: card.skills.map((s) => s.id) };
  } catch (error) {
    report.card = errorOutcome(error);
  }
  for (const step of plan.steps) {
    let outcome;
    try {
      const client = await clientFor(step.token ?? plan.token);
      let id = step.id;
      if (id && typeof id === "object") id = report.steps[id.task_of].id;
      if (step.call === "send") {
        const result = await client.sendMessage(sendParams(step));
        outcome = result.status !== undefined ? taskOutcome(result) : { kind: "message", message: result };
      } else if (step.call === "get") {
        outcome = taskOutcome(await client.getTask(which === "03" ? { id } : { tenant: "", id }));
      } else if (step.call === "cancel") {
        outcome = taskOutcome(await client.cancelTask(which === "03" ? { id } : { tenant: "", id }));
      } else {
        throw new Error(`unknown call ${step.call}`);
      }
    } catch (error) {
      outcome = errorOutcome(error);
    }
    report.steps[step.label] = outcome;
  }
  process.stdout.write(JSON.stringify(report));
}

await main();
