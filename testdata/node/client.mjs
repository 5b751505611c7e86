// A scripted MCP client on the TypeScript SDK (@modelcontextprotocol/sdk),
// driven by Go tests through the nodemcp package (nodemcp.TSClient).
//
//   node client.mjs <url> <steps-json> [<options-json>]
//
// <url>      the MCP endpoint: .../mcp for streamable HTTP, .../sse for SSE.
// <steps>    a JSON array run in order after connecting (initialize):
//   {"op":"listTools"}
//   {"op":"callTool","name":"echo","args":{...},"progress":true,"timeoutMs":N}
//   {"op":"listResources"}            {"op":"listResourceTemplates"}
//   {"op":"readResource","uri":"..."} {"op":"subscribeResource","uri":"..."}
//   {"op":"listPrompts"}              {"op":"getPrompt","name":"...","args":{...}}
//   {"op":"setLoggingLevel","level":"debug"}
//   {"op":"ping"}
//   {"op":"request","method":"...","params":{...}}   any request, raw result
//   {"op":"notify","method":"...","params":{...}}    a client notification
//   {"op":"waitNotification","method":"...","count":N,"timeoutMs":N}
//   {"op":"terminate"}   HTTP DELETE of the session (transport.terminateSession)
//   {"op":"close"}       client.close()
// <options>  optional JSON object:
//   {"transport":"http"|"sse"  (default: "sse" if the URL path ends in /sse),
//    "headers":{"Name":"value"}, "timeoutMs":N (per request, default 30000),
//    "capabilities":{...} (client capabilities), "clientName":"..."}
//
// It prints one JSON report on stdout and exits 0 (2 on bad usage):
//   {"connected":bool, "connectError":{code,message}?, "sessionId":"...",
//    "protocolVersion":"...", "serverInfo":{}, "serverCapabilities":{},
//    "instructions":"...",
//    "steps":[{"op":"...","ok":bool,"result":{}?,"error":{code,message}?,
//              "progress":[{progress,total,message}]?, "sessionId":"..."}],
//    "notifications":[{method,params}], "transportErrors":["..."]}
// A failed step does not stop the scenario. Diagnostics go to stderr.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { ResultSchema } from "@modelcontextprotocol/sdk/types.js";

function usage(msg) {
  console.error(`client.mjs: ${msg}`);
  console.error("usage: node client.mjs <url> <steps-json> [<options-json>]");
  process.exit(2);
}

const [, , url, stepsArg, optionsArg] = process.argv;
if (!url || !stepsArg) usage("missing arguments");
let steps, options;
try {
  steps = JSON.parse(stepsArg);
  options = optionsArg ? JSON.parse(optionsArg) : {};
} catch (e) {
  usage(`bad JSON: ${e.message}`);
}
if (!Array.isArray(steps)) usage("steps must be a JSON array");

const endpoint = new URL(url);
const kind = options.transport ?? (endpoint.pathname.endsWith("/sse") ? "sse" : "http");
const requestInit = { headers: options.headers ?? {} };
const timeout = options.timeoutMs ?? 30000;

let transport;
if (kind === "http") {
  transport = new StreamableHTTPClientTransport(endpoint, { requestInit });
} else if (kind === "sse") {
  // requestInit's headers go on the SSE GET and on the POSTs alike.
  transport = new SSEClientTransport(endpoint, { requestInit });
} else {
  usage(`unknown transport ${kind}`);
}

const report = {
  connected: false,
  sessionId: undefined,
  protocolVersion: undefined,
  steps: [],
  notifications: [],
  transportErrors: [],
};

// The client tells the transport the negotiated version after initialize.
const setVersion = transport.setProtocolVersion?.bind(transport);
transport.setProtocolVersion = (v) => {
  report.protocolVersion = v;
  setVersion?.(v);
};

const client = new Client(
  { name: options.clientName ?? "nodemcp-client", version: "1.0.0" },
  { capabilities: options.capabilities ?? {} },
);
const notifications = [];
const waiters = new Set();
client.fallbackNotificationHandler = async (n) => {
  notifications.push({ method: n.method, params: n.params });
  for (const w of waiters) w();
};
client.onerror = (e) => report.transportErrors.push(String(e?.message ?? e));

function errorOf(e) {
  let message = String(e?.message ?? e);
  if (e?.cause) message += `: ${e.cause.message ?? e.cause}`;
  const out = { message };
  if (typeof e?.code === "number") out.code = e.code;
  else if (e?.code !== undefined) out.message += ` (${e.code})`;
  if (e?.data !== undefined) out.data = e.data;
  return out;
}

function waitNotification(method, count, ms) {
  const have = () => notifications.filter((n) => n.method === method).length >= count;
  if (have()) return Promise.resolve({ count: notifications.filter((n) => n.method === method).length });
  return new Promise((resolve, reject) => {
    const w = () => {
      if (!have()) return;
      cleanup();
      resolve({ count: notifications.filter((n) => n.method === method).length });
    };
    const t = setTimeout(() => {
      cleanup();
      reject(new Error(`timed out waiting for ${count} ${method} notification(s)`));
    }, ms);
    const cleanup = () => {
      clearTimeout(t);
      waiters.delete(w);
    };
    waiters.add(w);
  });
}

async function runStep(step, out) {
  const opts = { timeout: step.timeoutMs ?? timeout };
  switch (step.op) {
    case "listTools":
      return client.listTools(undefined, opts);
    case "callTool": {
      if (step.progress) {
        out.progress = [];
        opts.onprogress = (p) => out.progress.push(p);
        opts.resetTimeoutOnProgress = true;
      }
      return client.callTool({ name: step.name, arguments: step.args ?? {} }, undefined, opts);
    }
    case "listResources":
      return client.listResources(undefined, opts);
    case "listResourceTemplates":
      return client.listResourceTemplates(undefined, opts);
    case "readResource":
      return client.readResource({ uri: step.uri }, opts);
    case "subscribeResource":
      return client.subscribeResource({ uri: step.uri }, opts);
    case "listPrompts":
      return client.listPrompts(undefined, opts);
    case "getPrompt":
      return client.getPrompt({ name: step.name, arguments: step.args ?? {} }, opts);
    case "setLoggingLevel":
      return client.setLoggingLevel(step.level, opts);
    case "ping":
      return client.ping(opts);
    case "request":
      return client.request({ method: step.method, params: step.params }, ResultSchema, opts);
    case "notify":
      await client.notification({ method: step.method, params: step.params });
      return {};
    case "waitNotification":
      return waitNotification(step.method, step.count ?? 1, step.timeoutMs ?? timeout);
    case "terminate":
      if (typeof transport.terminateSession !== "function") {
        throw new Error(`terminate: not supported by the ${kind} transport`);
      }
      await transport.terminateSession();
      return {};
    case "close":
      await client.close();
      return {};
    default:
      throw new Error(`unknown op ${JSON.stringify(step.op)}`);
  }
}

try {
  await client.connect(transport, { timeout });
  report.connected = true;
  report.sessionId = transport.sessionId;
  report.serverInfo = client.getServerVersion();
  report.serverCapabilities = client.getServerCapabilities();
  report.instructions = client.getInstructions();
} catch (e) {
  report.connectError = errorOf(e);
}

if (report.connected) {
  for (const step of steps) {
    const out = { op: step.op, ok: false };
    try {
      out.result = await runStep(step, out);
      out.ok = true;
    } catch (e) {
      out.error = errorOf(e);
    }
    out.sessionId = transport.sessionId;
    report.steps.push(out);
  }
}
report.notifications = notifications;

try {
  await client.close();
} catch (e) {
  console.error(`close: ${e?.message ?? e}`);
}
process.stdout.write(JSON.stringify(report) + "\n", () => process.exit(0));
