#!/usr/bin/env bash
# bench/llmcost.sh: what the LLM route's work costs the gateway per
# request, in user-space instructions and simulated cache misses, counted
# by valgrind's callgrind (exact where CPU time on a shared VM swings by a
# third).
#
#   bench/llmcost.sh BIN_DIR GATEWAY_BIN OUT_MD TMP_DIR
#
# BIN_DIR holds bench/run.sh's helpers (llmupstream, freeport, probe). One
# gateway process (GOMAXPROCS=1, GOGC=off, its default access log) serves
# two binds in front of the emulated provider, as in bench/gateway.yaml:
# the LLM route (alias, default, e-mail mask, backend key) and a plain
# route. Each gets the bench's request (bench/llm/request.json) on one
# keep-alive connection: WARM requests, then the counters are reset (or
# dumped) and MEASURE requests counted, the LLM route's and the plain
# route's apart. The difference is the LLM work. The cache simulation
# (--cache-sim=yes: 32 KiB I1 and D1, 512 KiB LL) says how much of the
# request path's code and data miss. Writes a Markdown section to OUT_MD.
set -euo pipefail

BIN=$1 GATEWAY=$2 OUT_MD=$3 TMP=$4
WARM=${LLMCOST_WARM:-500}
MEASURE=${LLMCOST_REQUESTS:-3000}
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BODY=$BENCH_DIR/llm/request.json
KEY=bench-key
mkdir -p "$TMP"

mapfile -t ports < <("$BIN/freeport" -n 3)
UP_PORT=${ports[0]} LLM_PORT=${ports[1]} PLAIN_PORT=${ports[2]}
"$BIN/llmupstream" -addr "127.0.0.1:$UP_PORT" -key "$KEY" >"$TMP/llmupstream.log" 2>&1 &
UP_PID=$!
GW_PID=
trap 'kill "$UP_PID" ${GW_PID:+"$GW_PID"} 2>/dev/null || true' EXIT
"$BIN/probe" -pid "$UP_PID" -url "http://127.0.0.1:$UP_PORT/healthz" >/dev/null

cat >"$TMP/gateway.yaml" <<EOF
config:
  adminAddr: "off"
  statsAddr: "off"
  readinessAddr: "off"
binds:
- port: $LLM_PORT
  listeners:
  - protocol: HTTP
    routes:
    - policies:
        ai:
          modelAliases: { fast: gpt-4o-mini }
          defaults: { temperature: 0.2 }
          promptGuard:
            request:
            - regex:
                action: mask
                rules: [{ builtin: email }]
      backends:
      - ai:
          name: openai
          provider: { openAI: {} }
          hostOverride: 127.0.0.1:$UP_PORT
          policies:
            backendAuth: { key: $KEY }
- port: $PLAIN_PORT
  listeners:
  - protocol: HTTP
    routes:
    - backends:
      - host: 127.0.0.1:$UP_PORT
EOF

OUT=$TMP/gateway.callgrind
rm -f "$OUT"*
# cpu.rdtscp=off: valgrind does not decode RDTSCP, which the Go runtime
# reads its clock with when a lock is contended (SIGILL, then a crash).
GOMAXPROCS=1 GOGC=off GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off \
	valgrind --tool=callgrind --cache-sim=yes --I1=32768,8,64 --D1=32768,8,64 --LL=524288,8,64 \
	--log-file="$TMP/gateway.valgrind" --callgrind-out-file="$OUT" \
	"$GATEWAY" -f "$TMP/gateway.yaml" >/dev/null 2>"$TMP/gateway.log" &
GW_PID=$!

# post PORT N [KEY]: N chat requests on one connection once the route
# answers (the plain route passes the client's key on).
post() {
	local args=(-pid "$GW_PID" -url "http://127.0.0.1:$1/v1/chat/completions" -method POST -body "$BODY"
		-header "Content-Type: application/json" -timeout 600s -then "$2")
	[[ -n ${3:-} ]] && args+=(-header "Authorization: Bearer $3")
	"$BIN/probe" "${args[@]}" >/dev/null
}
post "$LLM_PORT" "$WARM"
post "$PLAIN_PORT" "$WARM" "$KEY"
callgrind_control --zero "$GW_PID" >/dev/null 2>&1
post "$LLM_PORT" "$((MEASURE - 1))"
callgrind_control --dump "$GW_PID" >/dev/null 2>&1
post "$PLAIN_PORT" "$((MEASURE - 1))" "$KEY"
callgrind_control --dump "$GW_PID" >/dev/null 2>&1
kill -9 "$GW_PID" 2>/dev/null || true
wait "$GW_PID" 2>/dev/null || true

# counts FILE: the summary's events per request: Ir I1mr D1mr+D1mw LL misses.
counts() {
	local events summary
	events=$(sed -n 's/^events: *//p' "$1" | head -n 1)
	summary=$(sed -n 's/^summary: *//p' "$1")
	[[ -n $summary ]] || {
		echo "llmcost: no callgrind summary in $1" >&2
		return 1
	}
	awk -v ev="$events" -v su="$summary" -v n="$MEASURE" 'BEGIN {
		split(ev, e, " "); split(su, s, " ")
		for (i in e) v[e[i]] = s[i]
		printf "%d %d %d %d\n", v["Ir"] / n, v["I1mr"] / n, (v["D1mr"] + v["D1mw"]) / n, (v["ILmr"] + v["DLmr"] + v["DLmw"]) / n
	}'
}
read -r llm_ir llm_i1 llm_d1 llm_ll < <(counts "$OUT.1")
read -r plain_ir plain_i1 plain_d1 plain_ll < <(counts "$OUT.2")

{
	echo
	echo "## LLM work (instructions)"
	echo
	echo "User-space instructions and simulated cache misses per request, counted by callgrind (\`bench/llmcost.sh\`): one gateway process under valgrind (\`GOMAXPROCS=1\`, \`GOGC=off\`, its default access log) with the LLM case's two routes in front of \`bench/llmupstream\`, $MEASURE of the bench's chat requests on one keep-alive connection to each after $WARM of warm-up. The cache simulation has 32 KiB I1 and D1 and a 512 KiB last level. The kernel's part is left out; the LLM route makes no more system calls than the plain one (it reads the body whole where the plain route streams it)."
	echo
	echo "| route | instructions | I1 misses | D1 misses | LL misses |"
	echo "|---|---:|---:|---:|---:|"
	printf '| gateway, LLM route | %s | %s | %s | %s |\n' "$llm_ir" "$llm_i1" "$llm_d1" "$llm_ll"
	printf '| gateway, plain route | %s | %s | %s | %s |\n' "$plain_ir" "$plain_i1" "$plain_d1" "$plain_ll"
	printf '| the LLM work | %s | %s | %s | %s |\n' "$((llm_ir - plain_ir))" "$((llm_i1 - plain_i1))" "$((llm_d1 - plain_d1))" "$((llm_ll - plain_ll))"
} >"$OUT_MD"
