// Drive an A2A server with the @a2a-js/sdk client under node and print, as JSON, how the
// client took every answer (the plan and the report: see a2a_js_plan.mjs). Run from this
// folder after `npm ci`:
//
//   node a2a_js_client.mjs 03|13 < plan.json

import { readFileSync } from "node:fs";

import { runPlan } from "./a2a_js_plan.mjs";

const which = process.argv[2];
if (which !== "03" && which !== "13") {
  console.error("usage: node a2a_js_client.mjs 03|13 < plan.json");
  process.exit(2);
}
const pkg = `a2a-js-${which}`;
const sdk = await import(`${pkg}/client`);
const manifest = new URL(`./node_modules/${pkg}/package.json`, import.meta.url);
const version = JSON.parse(readFileSync(manifest, "utf8")).version;

let input = "";
for await (const chunk of process.stdin) input += chunk;
const report = await runPlan(sdk, which, version, JSON.parse(input));
process.stdout.write(JSON.stringify(report));
