// Runs @modelcontextprotocol/server-everything over an HTTP transport bound to
// loopback only, on the port in $PORT (0 or unset: one the OS picks).
//
//   node everything-http.mjs streamableHttp   # endpoint /mcp
//   node everything-http.mjs sse              # endpoints GET /sse, POST /message
//
// The upstream server calls express's app.listen(PORT), which binds every
// interface and cannot report an OS-chosen port. This wrapper patches
// http.Server#listen before loading it so that the server binds 127.0.0.1
// and, once it listens, prints one line on stdout:
//
//   NODEMCP_LISTENING http://127.0.0.1:<port>
//
// (the nodemcp Go package waits for that line).
import http from "node:http";

const transport = process.argv[2] || "streamableHttp";
if (transport !== "streamableHttp" && transport !== "sse") {
  console.error(`usage: node everything-http.mjs [streamableHttp|sse]`);
  process.exit(2);
}

const port = Number(process.env.PORT || 0);
const origListen = http.Server.prototype.listen;
http.Server.prototype.listen = function (...args) {
  const cb = typeof args[args.length - 1] === "function" ? args.pop() : undefined;
  this.once("listening", () => {
    const addr = this.address();
    process.stdout.write(`NODEMCP_LISTENING http://127.0.0.1:${addr.port}\n`);
  });
  return origListen.call(this, { port, host: "127.0.0.1" }, cb);
};

// The upstream entry point dispatches on argv[2] and imports only the
// transport it needs.
process.argv = [process.argv[0], "everything", transport];
await import(
  new URL(
    "./node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    import.meta.url,
  )
);
