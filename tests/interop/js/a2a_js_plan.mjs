// Run a plan of calls through an @a2a-js/sdk client and report how the client took every
// answer. Shared by the node entry point (a2a_js_client.mjs) and the browser page of
// tests/interop/test_browser.py, so both run the same client code.
//
// A plan: {"origin": "http://127.0.0.1:<port>", "card_path": "/.well-known/...", "token": "...",
// "steps": [...]} (the card read at card_path, where the server serves it); each step is
//   {"label", "call": "send", "skill": <skillId or null>, "parts": [<A2A 0.3 parts>]}
//   {"label", "call": "get" | "cancel", "id": "<task id>" | {"task_of": "<label>"}}
// with an optional "token" overriding the plan's for that step (its own client).
// The report: {"sdk": "<version>", "card": <outcome>, "steps": {label: <outcome>}}, an
// outcome being {"kind": "task", "id", "contextId", "state", "statusText", "artifacts":
// [{name, parts: [{kind, text | data}]}]}, {"kind": "card", "skills": [ids]} or {"kind":
// "error", "type", "name", "message", "code", "data"} (the error the client raised; code
// and data are the JSON-RPC error's when the client kept them).
//
// which is "03" (@a2a-js/sdk 0.3, A2A 0.3: the service's protocol) or "13" (@a2a-js/sdk
// 1.3, A2A 1.0, with the v0.3 compat layer on, as a 1.x user must do to reach a 0.3 server).

// The v1.0 task states (a protobuf enum) by number, as their v0.3 names.
const V1_STATES = {
  0: "unknown", 1: "submitted", 2: "working", 3: "completed", 4: "failed",
  5: "canceled", 6: "input-required", 7: "rejected", 8: "auth-required",
};

function v1Part(part) {
  const content = part.kind === "text" ? { $case: "text", value: part.text } : { $case: "data", value: part.data };
  return { content, metadata: undefined, filename: "", mediaType: "" };
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

function sendParams(which, step) {
  const metadata = step.skill == null ? undefined : { skillId: step.skill };
  const messageId = globalThis.crypto.randomUUID();
  if (which === "03") {
    return { message: { kind: "message", role: "user", messageId, parts: step.parts, metadata } };
  }
  const message = {
    messageId, contextId: "", taskId: "", role: 1, parts: step.parts.map(v1Part),
    metadata, extensions: [], referenceTaskIds: [],
  };
  return { tenant: "", message, configuration: undefined, metadata: undefined };
}

// A client for one token, made as the SDK's README shows: a ClientFactory whose JSON-RPC
// transport fetches through createAuthenticatingFetchWithRetry.
async function makeClient(sdk, which, origin, cardPath, token, baseFetch) {
  const fetchImpl = sdk.createAuthenticatingFetchWithRetry(baseFetch, {
    headers: async () => ({ Authorization: `Bearer ${token}` }),
    shouldRetryWithHeaders: async () => undefined,
  });
  const { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } = sdk;
  const overrides = which === "03"
    ? { transports: [new JsonRpcTransportFactory({ fetchImpl })] }
    : {
        transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } })],
        cardResolver: new sdk.DefaultAgentCardResolver({ legacyCompat: { enabled: true }, fetchImpl: baseFetch }),
      };
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, overrides));
  return factory.createFromUrl(origin, cardPath);
}

export async function runPlan(sdk, which, version, plan, baseFetch = globalThis.fetch.bind(globalThis)) {
  const clients = new Map();
  const clientFor = async (token) => {
    if (!clients.has(token)) {
      clients.set(token, await makeClient(sdk, which, plan.origin, plan.card_path, token, baseFetch));
    }
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
      const ids = which === "03" ? { id } : { tenant: "", id };
      if (step.call === "send") {
        const result = await client.sendMessage(sendParams(which, step));
        outcome = result.status !== undefined ? taskOutcome(result) : { kind: "message", message: result };
      } else if (step.call === "get") {
        outcome = taskOutcome(await client.getTask(ids));
      } else if (step.call === "cancel") {
        outcome = taskOutcome(await client.cancelTask(ids));
      } else {
        throw new Error(`unknown call ${step.call}`);
      }
    } catch (error) {
      outcome = errorOutcome(error);
    }
    report.steps[step.label] = outcome;
  }
  return report;
}
