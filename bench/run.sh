#!/usr/bin/env bash
# bench/run.sh: throughput, latency and memory of the gateway against nginx
# (with and without response buffering), HAProxy, a bare fasthttp proxy (the
# reference) and no proxy at all, access logs on for every target unless
# BENCH_ACCESS_LOG=off, plus the gateway's policy route (JWT, CEL
# authorization, local rate limit) beside its plain route, an LLM case
# against an emulated provider, and the connection layer (TCP throughput
# and TLS passthrough against HAProxy, HTTPS and HTTP/2 termination against
# nginx); written to bench/RESULTS.md. See bench/README.md.
set -euo pipefail

usage() {
	cat <<'EOF'
usage: bench/run.sh [--skip-gateway]

  --skip-gateway   do not build or measure the gateway (the run still exits 0)

Environment knobs (defaults in brackets):
  BENCH_DURATION      wrk duration per measured run, wrk syntax [3s]
  BENCH_ROUNDS        measured runs per target and case; the median is reported [5]
  BENCH_WARMUP        wrk warm-up run before each measured run [2s]
  BENCH_IDLE_CONNS    idle keep-alive connections for the memory test [10000]
  BENCH_IDLE_HOLD     how long the memory test holds them idle before measuring [5] (seconds)
  BENCH_PROXY_CPU     CPU the proxy under test is pinned to [0]
  BENCH_LOAD_CPU      CPU wrk and idleconns are pinned to [1]
  BENCH_UPSTREAM_CPU  CPU the upstream server is pinned to [BENCH_PROXY_CPU]
  BENCH_TARGETS       subset of "direct gateway nginx nginx-nobuf haproxy fasthttp" [all six]
                      (gateway-policy and the LLM case's gateway-plain, routes of the gateway,
                      run with gateway)
  BENCH_ACCESS_LOG    on: every target writes an access log to a file; off: none [on]
  BENCH_LLM_RATE      request rate of the LLM case's constant-rate runs [5000] (per second)
  BENCH_CASES         subset of "http policy llm tcp tls https h2 memory mcp cost" [all]
                      (http: the three plain cases; tcp: TCP throughput; tls: TLS passthrough
                      connections; https, h2: TLS termination; memory: the idle-connection test;
                      cost: the callgrind counts)
  BENCH_TCP_BYTES     bytes of each TCP throughput run [1073741824] (1 GiB)
  BENCH_TCP_CONNS     connections the TCP throughput run spreads them over [4]
  BENCH_TLS_CONNS     concurrent workers of the TLS passthrough case [50]
  BENCH_HTTPS_CONNS   wrk connections of the HTTPS case [50]
  BENCH_H2_CONNS      h2load connections of the h2 case (-c) [10]
  BENCH_H2_STREAMS    h2load streams in flight per connection (-m) [10]
  BENCH_GATEWAY_BIN   use this gateway binary instead of building ./cmd/gateway
  BENCH_RESULTS       markdown file to write [bench/RESULTS.md]
EOF
}

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)
BIN=$BENCH_DIR/.bin
OUT=$BIN/last-run
export PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin

DURATION=${BENCH_DURATION:-3s}
ROUNDS=${BENCH_ROUNDS:-5}
WARMUP=${BENCH_WARMUP:-2s}
IDLE_CONNS=${BENCH_IDLE_CONNS:-10000}
IDLE_HOLD=${BENCH_IDLE_HOLD:-5}
PROXY_CPU=${BENCH_PROXY_CPU:-0}
LOAD_CPU=${BENCH_LOAD_CPU:-1}
# The upstream shares the proxy's CPU so the proxy's CPU is always the
# bottleneck; see "Pinning" in bench/README.md.
UPSTREAM_CPU=${BENCH_UPSTREAM_CPU:-$PROXY_CPU}
ALL_TARGETS="direct gateway nginx nginx-nobuf haproxy fasthttp"
TARGETS=${BENCH_TARGETS:-$ALL_TARGETS}
ACCESS_LOG=${BENCH_ACCESS_LOG:-on}
LLM_RATE=${BENCH_LLM_RATE:-5000}
ALL_CASES="http policy llm tcp tls https h2 memory mcp cost"
BENCH_CASE_GROUPS=${BENCH_CASES:-$ALL_CASES}
TCP_BYTES=${BENCH_TCP_BYTES:-1073741824}
TCP_CONNS=${BENCH_TCP_CONNS:-4}
TLS_CONNS=${BENCH_TLS_CONNS:-50}
HTTPS_CONNS=${BENCH_HTTPS_CONNS:-50}
H2_CONNS=${BENCH_H2_CONNS:-10}
H2_STREAMS=${BENCH_H2_STREAMS:-10}
GATEWAY_BIN=${BENCH_GATEWAY_BIN:-}
RESULTS=${BENCH_RESULTS:-$BENCH_DIR/RESULTS.md}
SKIP_GATEWAY=0

for arg in "$@"; do
	case $arg in
	--skip-gateway) SKIP_GATEWAY=1 ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# ---------------------------------------------------------------- inputs

# secs DURATION: whole seconds in a wrk duration (N, Ns, Nm, Nh).
secs() {
	local d=$1
	[[ $d =~ ^([0-9]+)([smh]?)$ ]] || die "bad duration '$d' (want e.g. 10s, 2m)"
	case ${BASH_REMATCH[2]} in
	m) echo $((BASH_REMATCH[1] * 60)) ;;
	h) echo $((BASH_REMATCH[1] * 3600)) ;;
	*) echo $((BASH_REMATCH[1])) ;;
	esac
}
secs "$DURATION" >/dev/null
secs "$WARMUP" >/dev/null
[[ $IDLE_CONNS =~ ^[0-9]+$ && $IDLE_CONNS -ge 1 ]] || die "BENCH_IDLE_CONNS must be a positive integer"
[[ $IDLE_HOLD =~ ^[0-9]+$ ]] || die "BENCH_IDLE_HOLD must be a whole number of seconds"
[[ $ROUNDS =~ ^[0-9]+$ && $ROUNDS -ge 1 ]] || die "BENCH_ROUNDS must be a positive integer"
[[ $ACCESS_LOG == on || $ACCESS_LOG == off ]] || die "BENCH_ACCESS_LOG must be on or off"
[[ $LLM_RATE =~ ^[0-9]+$ && $LLM_RATE -ge 1 ]] || die "BENCH_LLM_RATE must be a positive integer"
for t in $TARGETS; do
	case $t in direct | gateway | nginx | nginx-nobuf | haproxy | fasthttp) ;; *) die "unknown target '$t' in BENCH_TARGETS" ;; esac
done
for g in $BENCH_CASE_GROUPS; do
	[[ " $ALL_CASES " == *" $g "* ]] || die "unknown case '$g' in BENCH_CASES (want some of: $ALL_CASES)"
done
for v in TCP_BYTES TCP_CONNS TLS_CONNS HTTPS_CONNS H2_CONNS H2_STREAMS; do
	[[ ${!v} =~ ^[0-9]+$ && ${!v} -ge 1 ]] || die "BENCH_$v must be a positive integer"
done
((TCP_CONNS <= TCP_BYTES)) || die "BENCH_TCP_CONNS must not exceed BENCH_TCP_BYTES"
wanted() { [[ " $TARGETS " == *" $1 "* ]]; }
# case_wanted GROUP: the group of cases is in BENCH_CASES.
case_wanted() { [[ " $BENCH_CASE_GROUPS " == *" $1 "* ]]; }

# ---------------------------------------------------------------- processes

declare -a STARTED=() # every background process this script started
declare -A PID=()     # target or role -> pid
declare -A HELPER=()  # target -> pid of a process that works for it (HAProxy's log receiver)
TMP=

# alive PID: true while the process exists and is not a zombie.
alive() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	[[ ${s%% *} != Z ]]
}

# stop PID: SIGTERM, wait up to 5 s, then SIGKILL; reaps the child.
stop() {
	local pid=$1 i
	if alive "$pid"; then
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 100; i++)); do
			alive "$pid" || break
			sleep 0.05
		done
		if alive "$pid"; then
			log "pid $pid ignored SIGTERM for 5s; sending SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	wait "$pid" 2>/dev/null || true
	forget "$pid"
}

# forget PID: drop a reaped pid so cleanup can never signal a reused one.
forget() {
	local keep=() p
	for p in "${STARTED[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done
	STARTED=("${keep[@]}")
}

cleanup() {
	local pid
	for pid in "${STARTED[@]}"; do
		stop "$pid"
	done
	STARTED=()
	[[ -n $TMP ]] && rm -rf "$TMP"
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- tools

install_missing() {
	local need=() cmd pkg
	for cmd in nginx:nginx haproxy:haproxy wrk:wrk taskset:util-linux timeout:coreutils valgrind:valgrind \
		h2load:nghttp2-client openssl:openssl; do
		pkg=${cmd#*:}
		command -v "${cmd%%:*}" >/dev/null 2>&1 || need+=("$pkg")
	done
	((${#need[@]})) || return 0
	[[ $(id -u) == 0 ]] || die "missing ${need[*]}; install them or run as root"
	command -v apt-get >/dev/null || die "missing ${need[*]} and no apt-get to install them"
	log "installing ${need[*]}"
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}"
}
install_missing

for cpu in "$PROXY_CPU" "$LOAD_CPU" "$UPSTREAM_CPU"; do
	taskset -c "$cpu" true 2>/dev/null ||
		die "CPU $cpu is not usable here (nproc=$(nproc)); set BENCH_PROXY_CPU/BENCH_LOAD_CPU/BENCH_UPSTREAM_CPU"
done
[[ $PROXY_CPU != "$LOAD_CPU" ]] || log "warning: proxy and load generator share CPU $PROXY_CPU"

# Raise the open-file limit as far as allowed; children inherit it.
hard=$(ulimit -Hn)
[[ $hard == unlimited ]] && hard=$(cat /proc/sys/fs/nr_open)
ulimit -n "$hard" 2>/dev/null || true
NOFILE=$(ulimit -n)
if ((IDLE_CONNS + 1000 > NOFILE)); then
	log "warning: open-file limit $NOFILE is too low for $IDLE_CONNS idle connections; using $((NOFILE - 1000))"
	IDLE_CONNS=$((NOFILE - 1000))
fi

# ---------------------------------------------------------------- build

rm -rf "$OUT"
mkdir -p "$OUT/wrk" "$OUT/targets"
TMP=$(mktemp -d /tmp/relaygate-bench.XXXXXX)
chmod 755 "$TMP"

declare -A STATUS=() NOTE=() RSS_IDLE=() RSS_OPENED=() RSS_CONNS=() RSS_PEAK=() CONNS_OPENED=() CONNS_OPEN_AT_END=()
declare -A LLM_FAILED=() # target -> why the LLM case cannot measure it
declare -A SENT=()       # target -> requests the load generators completed against it
declare -A LOG_LINES=()  # target -> lines in its access log at the end
declare -A LOG_OF=()     # target -> the file holding its own output (filled once the temp dir exists)
# The connection layer's cases (group: tcp, tls, https, h2).
declare -A L4_FAILED=()   # group -> why none of its targets can be measured
declare -A CASE_FAILED=() # group.target -> why the target is not measured in it
declare -A UNSERVED=()    # group.target -> why the case does not apply to the target
declare -A TLS_PARAMS=()  # group.target -> what openssl s_client negotiated
declare -a PROBLEMS=()

# fail TARGET REASON: mark a target failed; the run goes on without it.
fail() {
	STATUS[$1]=failed
	NOTE[$1]=$2
	PROBLEMS+=("$1: $2")
	log "$1 FAILED: $2"
	# A log kept in the temp dir (the gateway's) would go with it.
	if [[ -n ${LOG_OF[$1]:-} && ${LOG_OF[$1]} == "$TMP"/* ]]; then
		tail -n 200 "${LOG_OF[$1]}" >"$OUT/$1-failed.log" 2>/dev/null || true
	fi
	if [[ -n ${PID[$1]:-} ]]; then
		stop "${PID[$1]}"
		unset "PID[$1]"
	fi
	if [[ -n ${HELPER[$1]:-} ]]; then
		stop "${HELPER[$1]}"
		unset "HELPER[$1]"
	fi
}

# lastlines FILE: the end of a log, on one line, for a report note.
lastlines() { tail -n 3 "$1" 2>/dev/null | tr '\n' ' ' | cut -c1-300; }

log "building helpers into $BIN"
(cd "$ROOT" && for p in upstream fastproxy idleconns freeport probe report mcpbench llmupstream llmload logsink jwtgen \
	certgen tcpsink tcpload; do
	go build -o "$BIN/$p" "./bench/$p"
done) || die "building the bench helpers failed"

GATEWAY=
for t in $TARGETS; do STATUS[$t]=ok; done
if wanted gateway; then
	if ((SKIP_GATEWAY)); then
		STATUS[gateway]=skipped
		NOTE[gateway]="--skip-gateway"
	elif [[ -n $GATEWAY_BIN ]]; then
		if [[ -x $GATEWAY_BIN ]]; then
			GATEWAY=$GATEWAY_BIN
		else
			fail gateway "BENCH_GATEWAY_BIN=$GATEWAY_BIN is not executable"
		fi
	else
		log "building the gateway"
		if (cd "$ROOT" && go build -o "$BIN/gateway" ./cmd/gateway) >"$OUT/gateway-build.log" 2>&1; then
			GATEWAY=$BIN/gateway
		else
			fail gateway "go build ./cmd/gateway failed: $(lastlines "$OUT/gateway-build.log")"
		fi
	fi
fi

# ---------------------------------------------------------------- start

mapfile -t ports < <("$BIN/freeport" -n 28)
((${#ports[@]} == 28)) || die "could not get free ports"
UPSTREAM_PORT=${ports[0]}
# gateway-policy is a third bind of the gateway process: the plain route's
# upstream behind jwtAuth, authorization and localRateLimit (the policy case).
declare -A PORT=([direct]=${ports[0]} [gateway]=${ports[1]} [nginx]=${ports[3]} [haproxy]=${ports[4]}
	[fasthttp]=${ports[7]} [nginx-nobuf]=${ports[8]} [gateway-policy]=${ports[15]})
GW_READY_PORT=${ports[2]}
GW_MCP_PORT=${ports[5]}
MCP_TARGET_PORT=${ports[6]}
# The LLM case: the emulated provider (direct) and the proxies in front of it.
# gateway-plain is a second bind of the gateway process, a plain route to the
# provider: the LLM route's baseline with the same request (bench/README.md).
LLM_UPSTREAM_PORT=${ports[9]}
declare -A LLM_PORT=([direct]=$LLM_UPSTREAM_PORT [gateway]=${ports[10]} [nginx]=${ports[11]} [nginx-nobuf]=${ports[12]}
	[gateway-plain]=${ports[14]})
LLM_TARGETS=(direct gateway gateway-plain nginx)
LLM_BODY=$BENCH_DIR/llm/request.json
LLM_KEY=bench-key # the emulator's; matches backendAuth in gateway.yaml
HAPROXY_LOG_PORT=${ports[13]} # UDP: HAProxy's syslog target, bench/logsink
# The connection layer. bench/tcpsink is the upstream of the TCP and TLS
# passthrough cases (direct: tcpload straight to it); the HTTPS and h2
# cases reach the plain cases' upstream through each proxy's TLS listener.
# The gateway serves both TLS termination cases on one HTTPS listener (ALPN
# picks HTTP/1.1 or h2); nginx has a server block for each, as its docs
# configure them ("listen ... ssl", "listen ... ssl http2").
TCP_SINK_PORT=${ports[16]}
TLS_UPSTREAM_PORT=${ports[17]}
# haproxy-splice is a second frontend of the HAProxy process, splicing both
# directions (the TCP case only).
declare -A TCP_PORT=([direct]=$TCP_SINK_PORT [gateway]=${ports[18]} [haproxy]=${ports[21]} [haproxy-splice]=${ports[27]})
declare -A TLSP_PORT=([direct]=$TLS_UPSTREAM_PORT [gateway]=${ports[19]} [haproxy]=${ports[22]})
declare -A HTTPS_PORT=([gateway]=${ports[20]} [nginx]=${ports[23]} [nginx-nobuf]=${ports[25]})
declare -A H2_PORT=([gateway]=${ports[20]} [nginx]=${ports[24]} [nginx-nobuf]=${ports[26]})
TLS_SNI=pass.bench.test # the passthrough case's server name; both proxies route by it
HTTPS_SNI=bench.test

# The certificate of every TLS endpoint (the gateway's and nginx's HTTPS
# listeners, the passthrough upstream): ECDSA P-256, self-signed, fresh for
# each run, in the run's temp dir; clients trust it as their only root.
mkdir -p "$TMP/tls"
TLS_CERT=$TMP/tls/bench.crt
TLS_KEY=$TMP/tls/bench.key
"$BIN/certgen" -cert "$TLS_CERT" -key "$TLS_KEY" -names "$HTTPS_SNI,$TLS_SNI" ||
	die "bench/certgen failed to make the TLS cases' certificate"

# The policy case's credentials, made fresh for this run by bench/jwtgen into
# the run's output directory (bench/.bin/last-run/policy/): an ES256 key pair
# whose private half never leaves jwtgen, its public key set (given to the
# gateway inline, GW_POLICY_JWKS), the token wrk sends (sub "bench") and one
# the authorization rule must refuse (sub "not-bench"), both valid for 24 h.
POLICY_DIR=$OUT/policy
POLICY_TOKEN=
POLICY_JWKS_JSON=
if wanted gateway && [[ -n $GATEWAY ]]; then
	mkdir -p "$POLICY_DIR"
	"$BIN/jwtgen" -jwks "$POLICY_DIR/jwks.json" -token "$POLICY_DIR/token" -denied-token "$POLICY_DIR/denied-token" -ttl 24h ||
		die "bench/jwtgen failed to make the policy case's key and tokens"
	POLICY_JWKS_JSON=$(<"$POLICY_DIR/jwks.json")
	POLICY_TOKEN=$(<"$POLICY_DIR/token")
fi

# render TEMPLATE DEST KEY=VALUE...: fill @KEY@ placeholders.
render() {
	local tmpl=$1 dest=$2 kv args=()
	shift 2
	for kv in "$@"; do args+=(-e "s|@${kv%%=*}@|${kv#*=}|g"); done
	sed "${args[@]}" "$tmpl" >"$dest"
	! grep -v '^[[:space:]]*#' "$dest" | grep -q '@[A-Z_]*@' || die "unfilled placeholder in $dest"
}

# Where each target's access log goes: a file in the run's temp dir. The
# gateway's is its standard error (the access log's default destination).
declare -A ACCESS_FILE=()
for t in nginx nginx-nobuf haproxy fasthttp gateway; do
	mkdir -p "$TMP/$t"
	ACCESS_FILE[$t]=$TMP/$t/access.log
done
ACCESS_FILE[gateway]=$TMP/gateway/stderr.log

for t in nginx nginx-nobuf; do
	nginx_log=off
	[[ $ACCESS_LOG == on ]] && nginx_log="${ACCESS_FILE[$t]} combined buffer=64k flush=1s"
	buffering=on
	[[ $t == nginx-nobuf ]] && buffering=off
	render "$BENCH_DIR/nginx.conf.tmpl" "$TMP/$t/nginx.conf" DIR="$TMP/$t" PORT="${PORT[$t]}" \
		UPSTREAM_PORT="$UPSTREAM_PORT" NOFILE="$NOFILE" WORKER_CONNECTIONS=$((NOFILE - 100)) \
		ACCESS_LOG="$nginx_log" PROXY_BUFFERING=$buffering LLM_PORT="${LLM_PORT[$t]}" LLM_UPSTREAM_PORT="$LLM_UPSTREAM_PORT" \
		HTTPS_PORT="${HTTPS_PORT[$t]}" H2_PORT="${H2_PORT[$t]}" TLS_CERT="$TLS_CERT" TLS_KEY="$TLS_KEY"
	cp "$TMP/$t/nginx.conf" "$OUT/$t.conf"
done
# HAProxy refuses to start unless 2 * maxconn + 2 * maxpipes + a few fds fit
# the open-file limit, so with 20,000 fds it holds fewer than 10,000 idle
# connections. Its splicing frontend (the TCP case) takes pipes from a pool
# of maxpipes (by default maxconn / 4, which would cost 5,000 fds more);
# 64 is plenty for the case's few connections.
HAPROXY_MAXPIPES=64
HAPROXY_MAXCONN=$(((NOFILE - 100 - 2 * HAPROXY_MAXPIPES) / 2))
declare -A IDLE_N=([gateway]=$IDLE_CONNS [nginx]=$IDLE_CONNS [nginx-nobuf]=$IDLE_CONNS
	[haproxy]=$((IDLE_CONNS < HAPROXY_MAXCONN - 50 ? IDLE_CONNS : HAPROXY_MAXCONN - 50)))
haproxy_log="# no access log (BENCH_ACCESS_LOG=off)"
[[ $ACCESS_LOG == on ]] && haproxy_log="log 127.0.0.1:$HAPROXY_LOG_PORT local0"
render "$BENCH_DIR/haproxy.cfg.tmpl" "$TMP/haproxy/haproxy.cfg" PORT="${PORT[haproxy]}" \
	UPSTREAM_PORT="$UPSTREAM_PORT" MAXCONN="$HAPROXY_MAXCONN" MAXPIPES="$HAPROXY_MAXPIPES" LOG_TARGET="$haproxy_log" \
	TCP_PORT="${TCP_PORT[haproxy]}" TCP_SPLICE_PORT="${TCP_PORT[haproxy-splice]}" TCP_SINK_PORT="$TCP_SINK_PORT" \
	TLS_PORT="${TLSP_PORT[haproxy]}" \
	TLS_UPSTREAM_PORT="$TLS_UPSTREAM_PORT" TLS_SNI="$TLS_SNI"
cp "$TMP/haproxy/haproxy.cfg" "$BENCH_DIR/gateway.yaml" "$OUT/"
GW_LOG_LEVEL=info
[[ $ACCESS_LOG == on ]] || GW_LOG_LEVEL=info,access=off

# probe PID URL [LEN]: poll until URL answers 200 (with LEN body bytes),
# for at most 15 s, giving up early if process PID exits.
# Its complaint is left in probe.last (and appended to probe.log).
probe() {
	local rc=0
	"$BIN/probe" -pid "$1" -url "$2" -len "${3:--1}" -timeout 15s 2>"$OUT/probe.last" || rc=$?
	cat "$OUT/probe.last" >>"$OUT/probe.log"
	return "$rc"
}

# check_proxy TARGET: the target forwards both bodies intact.
check_proxy() {
	local base=http://127.0.0.1:${PORT[$1]}
	if ! probe "${PID[$1]}" "$base/small" 100 || ! probe "${PID[$1]}" "$base/1m" 1048576; then
		fail "$1" "does not forward correctly: $(lastlines "$OUT/probe.last")"
		return 1
	fi
}

log "starting upstream on 127.0.0.1:$UPSTREAM_PORT (CPU $UPSTREAM_CPU)"
taskset -c "$UPSTREAM_CPU" "$BIN/upstream" -addr "127.0.0.1:$UPSTREAM_PORT" >"$OUT/upstream.log" 2>&1 &
PID[direct]=$!
STARTED+=("${PID[direct]}")
probe "${PID[direct]}" "http://127.0.0.1:$UPSTREAM_PORT/small" 100 || die "upstream did not start: $(lastlines "$OUT/upstream.log")"

# The LLM case's provider, beside the upstream. Without it the LLM case is
# skipped; the rest still runs.
log "starting the emulated LLM provider on 127.0.0.1:$LLM_UPSTREAM_PORT (CPU $UPSTREAM_CPU)"
taskset -c "$UPSTREAM_CPU" "$BIN/llmupstream" -addr "127.0.0.1:$LLM_UPSTREAM_PORT" -key "$LLM_KEY" >"$OUT/llmupstream.log" 2>&1 &
PID[llm]=$!
STARTED+=("${PID[llm]}")
if ! probe "${PID[llm]}" "http://127.0.0.1:$LLM_UPSTREAM_PORT/healthz"; then
	why="the emulated LLM provider did not start: $(lastlines "$OUT/probe.last") $(lastlines "$OUT/llmupstream.log")"
	PROBLEMS+=("llm: $why")
	for t in "${LLM_TARGETS[@]}"; do LLM_FAILED[$t]=$why; done
fi

# The upstream of the TCP and TLS passthrough cases: a sink that reads and
# discards (TCP), and a crypto/tls server that answers one request per
# connection (TLS), beside the other upstreams. Without it those cases are
# skipped; the rest still runs.
if case_wanted tcp || case_wanted tls; then
	log "starting the connection-layer upstream on 127.0.0.1:$TCP_SINK_PORT and :$TLS_UPSTREAM_PORT (CPU $UPSTREAM_CPU)"
	taskset -c "$UPSTREAM_CPU" "$BIN/tcpsink" -addr "127.0.0.1:$TCP_SINK_PORT" -tls-addr "127.0.0.1:$TLS_UPSTREAM_PORT" \
		-cert "$TLS_CERT" -key "$TLS_KEY" >"$OUT/tcpsink.log" 2>&1 &
	PID[sink]=$!
	STARTED+=("${PID[sink]}")
	for ((i = 0; i < 300; i++)); do # 15 s bound
		grep -q 'tcpsink: ready' "$OUT/tcpsink.log" && break
		alive "${PID[sink]}" || break
		sleep 0.05
	done
	if ! grep -q 'tcpsink: ready' "$OUT/tcpsink.log"; then
		why="the connection-layer upstream (bench/tcpsink) did not start: $(lastlines "$OUT/tcpsink.log")"
		PROBLEMS+=("l4: $why")
		L4_FAILED=([tcp]=$why [tls]=$why)
	fi
fi

# The MCP server of the MCP case, started now so that its port is taken
# before the load cases' client sockets could take it.
MCP_PID=
if wanted gateway && ((!SKIP_GATEWAY)); then
	taskset -c "$UPSTREAM_CPU" "$BIN/mcpbench" serve -addr "127.0.0.1:$MCP_TARGET_PORT" >"$OUT/mcpbench-serve.log" 2>&1 &
	MCP_PID=$!
	STARTED+=("$MCP_PID")
	if ! probe "$MCP_PID" "http://127.0.0.1:$MCP_TARGET_PORT/ready"; then
		PROBLEMS+=("mcp: the MCP target did not start: $(lastlines "$OUT/mcpbench-serve.log")")
		MCP_PID=
	fi
fi

# LOG_OF: each target's own output (for failure notes). The gateway's is
# its standard error, which holds its access log.
LOG_OF=([gateway]=${ACCESS_FILE[gateway]} [nginx]=$OUT/nginx.log [nginx-nobuf]=$OUT/nginx-nobuf.log
	[haproxy]=$OUT/haproxy.log [fasthttp]=$OUT/fasthttp.log)

start_gateway() {
	GW_PORT=${PORT[gateway]} GW_READY_PORT=$GW_READY_PORT UPSTREAM_PORT=$UPSTREAM_PORT \
		GW_MCP_PORT=$GW_MCP_PORT MCP_TARGET_PORT=$MCP_TARGET_PORT \
		GW_LLM_PORT=${LLM_PORT[gateway]} GW_LLM_PLAIN_PORT=${LLM_PORT[gateway-plain]} \
		LLM_UPSTREAM_PORT=$LLM_UPSTREAM_PORT GW_LOG_LEVEL=$GW_LOG_LEVEL \
		GW_POLICY_PORT=${PORT[gateway-policy]} GW_POLICY_JWKS=$POLICY_JWKS_JSON \
		GW_TCP_PORT=${TCP_PORT[gateway]} TCP_SINK_PORT=$TCP_SINK_PORT GW_TLS_PORT=${TLSP_PORT[gateway]} \
		TLS_UPSTREAM_PORT=$TLS_UPSTREAM_PORT TLS_SNI=$TLS_SNI GW_HTTPS_PORT=${HTTPS_PORT[gateway]} \
		GW_TLS_CERT=$TLS_CERT GW_TLS_KEY=$TLS_KEY \
		taskset -c "$PROXY_CPU" "$GATEWAY" -f "$BENCH_DIR/gateway.yaml" >"${LOG_OF[gateway]}" 2>&1 &
	PID[gateway]=$!
	STARTED+=("$!")
	if ! probe "${PID[gateway]}" "http://127.0.0.1:$GW_READY_PORT/healthz/ready"; then
		fail gateway "not ready: $(lastlines "$OUT/probe.last") $(lastlines "${LOG_OF[gateway]}")"
		return 1
	fi
	check_proxy gateway
}

# start_nginx_instance TARGET: nginx or nginx-nobuf, each from its own
# rendered config and directory.
start_nginx_instance() {
	local t=$1
	taskset -c "$PROXY_CPU" nginx -e "$TMP/$t/error.log" -p "$TMP/$t" -c "$TMP/$t/nginx.conf" \
		>"${LOG_OF[$t]}" 2>&1 &
	PID[$t]=$!
	STARTED+=("$!")
	check_proxy "$t" || { cp "$TMP/$t/error.log" "$OUT/$t-error.log" 2>/dev/null; return 1; }
}

# HAProxy logs to syslog over UDP; bench/logsink plays the syslog daemon,
# on the proxy's CPU, and its CPU time counts as HAProxy's (see HELPER).
start_haproxy() {
	if [[ $ACCESS_LOG == on ]]; then
		taskset -c "$PROXY_CPU" "$BIN/logsink" -addr "127.0.0.1:$HAPROXY_LOG_PORT" -out "${ACCESS_FILE[haproxy]}" \
			>"$OUT/logsink.log" 2>&1 &
		HELPER[haproxy]=$!
		STARTED+=("$!")
		local i
		for ((i = 0; i < 300; i++)); do # 15 s bound
			grep -q 'logsink: ready' "$OUT/logsink.log" && break
			alive "${HELPER[haproxy]}" || break
			sleep 0.05
		done
		if ! grep -q 'logsink: ready' "$OUT/logsink.log"; then
			fail haproxy "its log receiver did not start: $(lastlines "$OUT/logsink.log")"
			return 1
		fi
	fi
	taskset -c "$PROXY_CPU" haproxy -db -f "$TMP/haproxy/haproxy.cfg" >"${LOG_OF[haproxy]}" 2>&1 &
	PID[haproxy]=$!
	STARTED+=("$!")
	check_proxy haproxy || { cp "${LOG_OF[haproxy]}" "$OUT/haproxy-failed.log"; return 1; }
}

# The reference: fasthttp's Server and HostClient and nothing else, plus an
# nginx-style buffered access log when logs are on.
start_fasthttp() {
	local logflag=()
	[[ $ACCESS_LOG == on ]] && logflag=(-access-log "${ACCESS_FILE[fasthttp]}")
	taskset -c "$PROXY_CPU" "$BIN/fastproxy" -addr "127.0.0.1:${PORT[fasthttp]}" \
		-upstream "127.0.0.1:$UPSTREAM_PORT" "${logflag[@]}" >"${LOG_OF[fasthttp]}" 2>&1 &
	PID[fasthttp]=$!
	STARTED+=("$!")
	check_proxy fasthttp
}

start_target() {
	case $1 in
	gateway) start_gateway ;;
	nginx | nginx-nobuf) start_nginx_instance "$1" ;;
	haproxy) start_haproxy ;;
	fasthttp) start_fasthttp ;;
	esac
}

# target_pids TARGET: the processes whose CPU time is the target's.
target_pids() {
	echo "${PID[$1]}"
	[[ -z ${HELPER[$1]:-} ]] || echo "${HELPER[$1]}"
}

# status_kib PID FIELD: a /proc/PID/status figure in KiB (0 if gone).
status_kib() {
	awk -v f="$2:" '$1 == f { print $2; found = 1 } END { if (!found) print 0 }' "/proc/$1/status" 2>/dev/null || echo 0
}

# tree_kib PID FIELD: FIELD summed over PID and its descendants.
tree_kib() {
	local total kid
	total=$(status_kib "$1" "$2")
	# shellcheck disable=SC2013 # the file is a space-separated pid list
	for kid in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
		total=$((total + $(tree_kib "$kid" "$2")))
	done
	echo "$total"
}

# proc_ticks PID: user+system CPU ticks of PID and its descendants.
proc_ticks() {
	local s kid total=0 f
	if s=$(cat "/proc/$1/stat" 2>/dev/null); then
		s=${s##*) }
		read -r -a f <<<"$s"
		total=$((f[11] + f[12])) # utime, stime (fields 14 and 15)
	fi
	# shellcheck disable=SC2013 # the file is a space-separated pid list
	for kid in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
		total=$((total + $(proc_ticks "$kid")))
	done
	echo "$total"
}

# cpu_snapshot PID...: sets SNAP to "BUSY STEAL OURS CHILDREN NS": BUSY is
# the machine's non-idle ticks (user, nice, system, irq, softirq: per-process
# times include the interrupt work done in their context), OURS the ticks of
# the given processes and their descendants, CHILDREN those of this shell's
# reaped children (wrk), NS the time. It must run in this shell, not in $(),
# or `times` would not see our children.
CLK_TCK=$(getconf CLK_TCK)
SNAP=
cpu_snapshot() {
	local user nice system irq softirq steal ours=0 pid cu cs kids
	# /proc/stat: cpu user nice system idle iowait irq softirq steal ...
	read -r _ user nice system _ _ irq softirq steal _ </proc/stat
	for pid in "$@"; do ours=$((ours + $(proc_ticks "$pid"))); done
	times >"$TMP/times"
	read -r cu cs < <(sed -n 2p "$TMP/times")
	kids=$(awk -v u="$cu" -v s="$cs" -v hz="$CLK_TCK" 'function sec(x, a) {
		split(x, a, "m"); sub("s", "", a[2]); return a[1] * 60 + a[2] }
		BEGIN { printf "%d", (sec(u) + sec(s)) * hz + 0.5 }')
	SNAP="$((user + nice + system + irq + softirq)) $steal $ours $kids $(date +%s%N)"
}

# other_cpu_pct BEFORE AFTER: CPU used by anything but the bench during the
# interval, hypervisor steal included, as a percentage of one CPU.
other_cpu_pct() {
	local b a
	read -r -a b <<<"$1"
	read -r -a a <<<"$2"
	awk -v busy=$((a[0] - b[0])) -v steal=$((a[1] - b[1])) -v ours=$((a[2] - b[2] + a[3] - b[3])) \
		-v ns=$((a[4] - b[4])) -v hz="$CLK_TCK" 'BEGIN {
		other = busy - ours + steal; if (other < 0) other = 0
		printf "%.0f", 100 * other / (ns / 1e9 * hz) }'
}

running() { [[ ${STATUS[$1]:-} == ok && -n ${PID[$1]:-} ]]; }

# process_of TARGET: the target whose process serves TARGET. gateway-plain
# and gateway-policy are routes of the gateway process, haproxy-splice a
# frontend of HAProxy's, not processes of their own: they run, fail, log
# and spend CPU as their process does.
process_of() {
	case $1 in
	gateway-plain | gateway-policy) echo gateway ;;
	haproxy-splice) echo haproxy ;;
	*) echo "$1" ;;
	esac
}

PROXIES=()
for t in gateway nginx nginx-nobuf haproxy fasthttp; do
	wanted "$t" || continue
	[[ $t == gateway && -z $GATEWAY ]] && continue
	log "starting $t on 127.0.0.1:${PORT[$t]} (CPU $PROXY_CPU)"
	if start_target "$t"; then
		PROXIES+=("$t")
		RSS_IDLE[$t]=$(tree_kib "${PID[$t]}" VmRSS)
		log "$t idle RSS ${RSS_IDLE[$t]} KiB"
	fi
done

# ---------------------------------------------------------------- load

# interruptible CMD...: run CMD and return its status. It runs in the
# background so that a SIGINT/SIGTERM to this script interrupts `wait` at once
# (bash delays traps until a foreground command ends); cleanup then stops it.
interruptible() {
	local pid rc=0
	"$@" &
	pid=$!
	STARTED+=("$pid")
	wait "$pid" || rc=$?
	forget "$pid"
	return "$rc"
}

# The cases. IDs must match bench/report/results.go.
CASES=(small-c50 1m-c10 small-c1)
POLICY_CASES=(policy-c50)
LLM_CASES=(llm-c1 llm-rate llm-c50)
# The connection layer: TCP throughput and TLS passthrough connections
# (direct, gateway, HAProxy), HTTPS and h2 termination (gateway, nginx).
TCP_CASES=(tcp-bulk)
TLS_CASES=(tls-conn)
HTTPS_CASES=(https-c50)
H2_CASES=(h2)
declare -A CONNS=([small-c50]=50 [1m-c10]=10 [small-c1]=1 [policy-c50]=50 [llm-c1]=1 [llm-c50]=50
	[https-c50]=$HTTPS_CONNS)
declare -A URL_PATH=([small-c50]=/small [1m-c10]=/1m [small-c1]=/small [policy-c50]=/small [https-c50]=/small [h2]=/small)

# llm_key TARGET: the key a client sends: its own, straight to the provider,
# through nginx or through the gateway's plain route; none to the gateway's
# LLM route, which adds the backend's.
llm_key() { [[ $1 == gateway ]] || echo "$LLM_KEY"; }
llm_url() { echo "http://127.0.0.1:${LLM_PORT[$1]}/v1/chat/completions"; }

# load_command CASE TARGET DURATION: sets LOAD to the load generator's
# command line for one run. wrk's closed loop for the connection counts;
# llmload's open loop (a request due every 1/rate s, answered or not) for
# the constant rate.
LOAD=()
load_command() {
	local c=$1 t=$2 d=$3
	case $c in
	llm-rate)
		LOAD=(taskset -c "$LOAD_CPU" "$BIN/llmload" rate -url "$(llm_url "$t")" -body "$LLM_BODY"
			-key "$(llm_key "$t")" -rate "$LLM_RATE" -duration "$(secs "$d")s") ;;
	llm-*)
		LOAD=(taskset -c "$LOAD_CPU" wrk -t1 "-c${CONNS[$c]}" "-d$d" --latency -s "$BENCH_DIR/llm/chat.lua"
			"$(llm_url "$t")" -- "$LLM_BODY" "$(llm_key "$t")") ;;
	tcp-bulk)
		# A fixed amount of bytes, not a duration: the warm-up moves as
		# many as a measured run.
		LOAD=(taskset -c "$LOAD_CPU" "$BIN/tcpload" bulk -addr "127.0.0.1:${TCP_PORT[$t]}" -bytes "$TCP_BYTES"
			-conns "$TCP_CONNS") ;;
	tls-conn)
		LOAD=(taskset -c "$LOAD_CPU" "$BIN/tcpload" tls -addr "127.0.0.1:${TLSP_PORT[$t]}" -sni "$TLS_SNI"
			-ca "$TLS_CERT" -conns "$TLS_CONNS" -duration "$(secs "$d")s") ;;
	https-*)
		LOAD=(taskset -c "$LOAD_CPU" wrk -t1 "-c${CONNS[$c]}" "-d$d" --latency
			"https://127.0.0.1:${HTTPS_PORT[$t]}${URL_PATH[$c]}") ;;
	h2)
		LOAD=(taskset -c "$LOAD_CPU" h2load -t1 "-c$H2_CONNS" "-m$H2_STREAMS" -D "$(secs "$d")"
			"https://127.0.0.1:${H2_PORT[$t]}${URL_PATH[$c]}") ;;
	*)
		LOAD=(taskset -c "$LOAD_CPU" wrk -t1 "-c${CONNS[$c]}" "-d$d" --latency)
		# The policy route's client carries the run's token; the plain
		# route's sends the small case's request as it is.
		if [[ $t == gateway-policy ]]; then
			LOAD+=(-H "Authorization: Bearer $POLICY_TOKEN")
		fi
		LOAD+=("http://127.0.0.1:${PORT[$t]}${URL_PATH[$c]}") ;;
	esac
}

# completed FILE: the requests a load run completed, from its output (wrk's
# "N requests in", llmload's and tcpload tls's requests=N, tcpload bulk's
# conns=N, h2load's "requests: ... N done"); 0 if none. Every case's count
# goes to SENT: each request gets an access line, and so does each
# connection of the TCP and TLS passthrough cases (the gateway's
# connection line; HAProxy's "option tcplog", haproxy.cfg.tmpl).
completed() {
	sed -n -e 's/^ *\([0-9][0-9]*\) requests in .*/\1/p' -e 's/^requests=\([0-9]*\)$/\1/p' -e 's/^conns=\([0-9]*\)$/\1/p' \
		-e 's/^requests: [0-9]* total, [0-9]* started, \([0-9]*\) done.*/\1/p' "$1" 2>/dev/null | head -n 1 | grep . || echo 0
}

# upstream_of CASE: the pid of the case's upstream (direct's process).
upstream_of() {
	case $1 in
	llm-*) echo "${PID[llm]}" ;;
	tcp-* | tls-*) echo "${PID[sink]:-}" ;;
	*) echo "${PID[direct]}" ;;
	esac
}

# measure CASE TARGET ROUND: the recorded load run of one round, after a
# warm-up in the first, with the CPU time of the target (direct's: the
# upstream's) and of everything else meanwhile.
measure() {
	local c=$1 t=$2 round=$3 base=$OUT/wrk/$1.$2.r$3 upstream pids proc group=${1%%-*}
	upstream=$(upstream_of "$c")
	proc=$(process_of "$t")
	running "$proc" || return 0 # failed earlier: already reported
	if [[ $c == llm-* && -n ${LLM_FAILED[$t]:-} ]]; then
		echo "${LLM_FAILED[$t]}" >"$base.err"
		return 0
	fi
	# The connection layer: an upstream that did not start, a target that
	# failed its check, or (h2) one that does not negotiate the protocol,
	# which is recorded as not served rather than as a failure.
	if [[ -n ${L4_FAILED[$group]:-} ]]; then
		echo "${L4_FAILED[$group]}" >"$base.err"
		return 0
	fi
	if [[ -n ${CASE_FAILED[$group.$t]:-} ]]; then
		echo "${CASE_FAILED[$group.$t]}" >"$base.err"
		return 0
	fi
	if [[ -n ${UNSERVED[$group.$t]:-} ]]; then
		echo "${UNSERVED[$group.$t]}" >"$OUT/wrk/$c.$t.unserved"
		return 0
	fi
	if [[ $t == gateway-policy && -n $POLICY_FAILED ]]; then
		echo "$POLICY_FAILED" >"$base.err"
		return 0
	fi
	if [[ $t == direct ]]; then
		pids=("$upstream")
	else
		mapfile -t pids < <(target_pids "$proc")
	fi
	if ! alive "${pids[0]}"; then
		echo "$proc is not running" >"$base.err"
		fail "$proc" "exited before $c: $(lastlines "${LOG_OF[$proc]:-$OUT/upstream.log}")"
		return 0
	fi
	if ((round == 1)); then
		log "$c: $t (warm-up $WARMUP, then $ROUNDS rounds of $DURATION)"
		load_command "$c" "$t" "$WARMUP"
		interruptible timeout -k 5 $(($(secs "$WARMUP") + 120)) "${LOAD[@]}" >"$OUT/wrk/$c.$t.warmup.txt" 2>&1 || true
		SENT[$proc]=$((${SENT[$proc]:-0} + $(completed "$OUT/wrk/$c.$t.warmup.txt")))
	fi
	local ours=("$upstream") before ticks=0 after=0 pid
	[[ $t == direct ]] || ours+=("${pids[@]}")
	cpu_snapshot "${ours[@]}"
	before=$SNAP
	for pid in "${pids[@]}"; do ticks=$((ticks + $(proc_ticks "$pid"))); done
	load_command "$c" "$t" "$DURATION"
	# h2load prints no percentiles: its per-request log gives them.
	[[ $c == h2 ]] && LOAD+=("--log-file=$base.h2log")
	if ! interruptible timeout -k 5 $(($(secs "$DURATION") + 120)) "${LOAD[@]}" >"$base.txt" 2>"$base.stderr"; then
		echo "${LOAD[3]##*/} failed: $(lastlines "$base.stderr") $(lastlines "$base.txt")" >"$base.err"
		rm -f "$base.txt"
	fi
	for pid in "${pids[@]}"; do after=$((after + $(proc_ticks "$pid"))); done
	ticks=$((after - ticks))
	cpu_snapshot "${ours[@]}"
	{
		echo "other_cpu_pct=$(other_cpu_pct "$before" "$SNAP")"
		# Negative only if the target died meanwhile (reported as failed).
		((ticks < 0)) || echo "target_cpu_us=$((ticks * 1000000 / CLK_TCK))"
	} >"$base.load"
	SENT[$proc]=$((${SENT[$proc]:-0} + $(completed "$base.txt")))
	if [[ $c == h2 && -f $base.txt ]]; then
		h2_percentiles "$base.h2log" >>"$base.txt"
		rm -f "$base.h2log"
	fi
	alive "${pids[0]}" || fail "$proc" "exited during $c: $(lastlines "${LOG_OF[$proc]:-$OUT/upstream.log}")"
}

# run_rounds CASE TARGET...: ROUNDS rounds of CASE. Within a case the
# targets take turns round after round, direct first, then the proxies in an
# order rotated from round to round, so neither the machine's drift nor
# running right after direct favours one proxy; the report takes each
# target's median round. The policy case compares two routes of one process
# and has no direct: its two targets alternate, each first in every other
# round.
run_rounds() {
	local c=$1 round t proc lead=(direct)
	shift
	local order=("$@")
	# The policy case compares two routes of one process, and TLS
	# termination has no direct (the upstream speaks plain HTTP).
	if [[ $c == policy-* || $c == https-* || $c == h2 ]]; then
		lead=()
	fi
	for ((round = 1; round <= ROUNDS; round++)); do
		for t in "${lead[@]}" "${order[@]}"; do
			proc=$(process_of "$t")
			wanted "$proc" || continue
			[[ ${STATUS[$proc]} == skipped ]] && continue
			measure "$c" "$t" "$round"
		done
		order=("${order[@]:1}" "${order[0]}")
	done
}

# h2_percentiles LOG: p50 and p99 of an h2load --log-file (tab-separated:
# start time, status, µs to the end of the response), as lines the report
# reads beside h2load's own summary.
h2_percentiles() {
	[[ -s $1 ]] || return 0
	cut -f3 "$1" | sort -n | awk '{ v[NR] = $1 } END {
		if (NR == 0) exit
		i99 = int(NR * 99 / 100) + 1; if (i99 > NR) i99 = NR
		printf "p50_us: %d\np99_us: %d\n", v[int(NR / 2) + 1], v[i99] }'
}

if case_wanted http; then
	for c in "${CASES[@]}"; do
		run_rounds "$c" gateway nginx nginx-nobuf haproxy fasthttp
	done
fi

# The policy case: first the policy route must enforce its policies, or its
# numbers would say nothing about them: no token gets 401, a valid token
# whose sub the authorization rule refuses gets 403, the run's token gets the
# 100-byte body. If it does not, the run fails (a problem in RESULTS.md, exit
# status 1) and the route is not measured; the plain route still is.
POLICY_FAILED=
# policy_check WHAT STATUS LEN [HEADER]: one request to the policy route
# must answer STATUS (with LEN body bytes; -1: any), within 5 s.
policy_check() {
	local what=$1 status=$2 len=$3 header=()
	[[ -z ${4:-} ]] || header=(-header "$4")
	if ! "$BIN/probe" -pid "${PID[gateway]}" -url "http://127.0.0.1:${PORT[gateway-policy]}/small" \
		-status "$status" -len "$len" -timeout 5s "${header[@]}" 2>"$OUT/probe.last"; then
		cat "$OUT/probe.last" >>"$OUT/probe.log"
		POLICY_FAILED="policy route check failed ($what): $(lastlines "$OUT/probe.last")"
		return 1
	fi
}
if case_wanted policy && wanted gateway && running gateway; then
	if ! policy_check "no token must get 401" 401 -1 ||
		! policy_check "sub not-bench must get 403" 403 -1 "Authorization: Bearer $(<"$POLICY_DIR/denied-token")" ||
		! policy_check "the run's token must get the body" 200 100 "Authorization: Bearer $POLICY_TOKEN"; then
		PROBLEMS+=("gateway-policy: $POLICY_FAILED")
		log "ERROR: the policy route failed its check (does it enforce its policies?); it will not be measured"
		log "ERROR: $POLICY_FAILED"
	fi
fi
if case_wanted policy; then
	for c in "${POLICY_CASES[@]}"; do
		run_rounds "$c" gateway gateway-policy
	done
fi

# The LLM case: first one request through each target, checked at the
# provider (the gateway's LLM route must have resolved the alias, set the
# default, masked the address and added the key; the others, its plain route
# included, must pass the body as sent), then the same rounds.
for t in "${LLM_TARGETS[@]}"; do
	case_wanted llm || break
	proc=$(process_of "$t")
	if ! wanted "$proc" || ! running "$proc" || [[ -n ${LLM_FAILED[$t]:-} ]]; then
		continue
	fi
	expect=raw
	[[ $t == gateway ]] && expect=gateway
	if ! taskset -c "$LOAD_CPU" "$BIN/llmload" check -url "$(llm_url "$t")" -upstream "http://127.0.0.1:$LLM_UPSTREAM_PORT" \
		-body "$LLM_BODY" -key "$(llm_key "$t")" -expect "$expect" >"$OUT/llmcheck.$t.log" 2>&1; then
		LLM_FAILED[$t]="LLM check failed: $(lastlines "$OUT/llmcheck.$t.log")"
		PROBLEMS+=("$t: ${LLM_FAILED[$t]}")
		log "$t: ${LLM_FAILED[$t]}"
	fi
done
if case_wanted llm; then
	for c in "${LLM_CASES[@]}"; do
		run_rounds "$c" gateway gateway-plain nginx
	done
fi

# ---------------------------------------------------------------- connection layer

# Before each case, every target must show that it does the work: the TCP
# case's bytes all reach the sink (1 MiB, counted back), the passthrough
# case's handshakes complete with the upstream's certificate for the
# server name, the HTTPS listener returns the small body over TLS to a
# client that verifies the certificate, and h2 answers over h2. A target
# that fails is reported (a problem in RESULTS.md, exit status 1) and not
# measured in that case; one that does not negotiate h2 at all is recorded
# as "not served by this build" (the gateway, until its HTTP/2 lands).
# case_fail GROUP TARGET WHY
case_fail() {
	CASE_FAILED[$1.$2]=$3
	PROBLEMS+=("$2: $1 case check failed: $3")
	log "ERROR: $2: $1 case check failed: $3"
}

# l4_targets [haproxy-splice]: the targets of the TCP and passthrough
# cases that run (the TCP case adds HAProxy's splicing frontend).
l4_targets() {
	local t
	for t in direct gateway haproxy "$@"; do
		wanted "$(process_of "$t")" && running "$(process_of "$t")" && echo "$t"
	done
}

# s_client PORT [ARGS...]: what OpenSSL's client (wrk's and h2load's
# library) negotiates with the TLS listener at PORT: protocol, cipher,
# key exchange and ALPN, on one line.
s_client() {
	local port=$1 out
	shift
	out=$(timeout 10 openssl s_client -connect "127.0.0.1:$port" -servername "$HTTPS_SNI" -CAfile "$TLS_CERT" \
		-verify_return_error "$@" </dev/null 2>&1) || true
	echo "$out" >>"$OUT/s_client.log"
	awk '/^New, / { sub(/^New, /, ""); sub(/Cipher is /, ""); proto = $0 }
		/^(Server|Peer) Temp Key:/ { sub(/^[A-Za-z]+ Temp Key: /, ""); kx = $0 }
		/^ALPN protocol:/ { alpn = $3 } /^No ALPN negotiated/ { alpn = "none" }
		END { if (proto == "") { print "no TLS session"; exit }
			printf "%s; key exchange %s; ALPN %s\n", proto, kx, alpn }' <<<"$out"
}

if case_wanted tcp && [[ -z ${L4_FAILED[tcp]:-} ]]; then
	for t in $(l4_targets haproxy-splice); do
		if ! taskset -c "$LOAD_CPU" "$BIN/tcpload" bulk -addr "127.0.0.1:${TCP_PORT[$t]}" -bytes 1048576 -conns 1 -timeout 10s \
			>"$OUT/tcpcheck.$t.log" 2>&1 || ! grep -q '^errors=0$' "$OUT/tcpcheck.$t.log"; then
			case_fail tcp "$t" "1 MiB did not all reach the sink: $(lastlines "$OUT/tcpcheck.$t.log")"
		fi
	done
	for c in "${TCP_CASES[@]}"; do
		run_rounds "$c" gateway haproxy haproxy-splice
	done
fi

if case_wanted https; then
	for t in gateway nginx; do
		wanted "$t" && running "$t" || continue
		if ! "$BIN/probe" -pid "${PID[$t]}" -url "https://127.0.0.1:${HTTPS_PORT[$t]}/small" -len 100 -ca "$TLS_CERT" \
			-servername "$HTTPS_SNI" -timeout 10s 2>"$OUT/probe.last"; then
			cat "$OUT/probe.last" >>"$OUT/probe.log"
			case_fail https "$t" "GET /small over TLS: $(lastlines "$OUT/probe.last")"
			continue
		fi
		TLS_PARAMS[https.$t]=$(s_client "${HTTPS_PORT[$t]}")
		log "https: $t negotiates ${TLS_PARAMS[https.$t]} with OpenSSL's client"
	done
	for c in "${HTTPS_CASES[@]}"; do
		run_rounds "$c" gateway nginx
	done
fi

if case_wanted h2; then
	for t in gateway nginx; do
		wanted "$t" && running "$t" || continue
		TLS_PARAMS[h2.$t]=$(s_client "${H2_PORT[$t]}" -alpn h2,http/1.1)
		log "h2: $t negotiates ${TLS_PARAMS[h2.$t]} when offered h2"
		if [[ ${TLS_PARAMS[h2.$t]} != *"ALPN h2" ]]; then
			if [[ $t == gateway ]]; then
				UNSERVED[h2.$t]="not served by this build: offered h2 and http/1.1, its HTTPS listener answered ${TLS_PARAMS[h2.$t]}"
				log "h2: the gateway does not negotiate h2; the h2 case records it as not served by this build"
			else
				case_fail h2 "$t" "does not negotiate h2: ${TLS_PARAMS[h2.$t]}"
			fi
			continue
		fi
		if ! taskset -c "$LOAD_CPU" h2load -n 10 -c 1 "https://127.0.0.1:${H2_PORT[$t]}/small" >"$OUT/h2check.$t.log" 2>&1 ||
			! grep -q '^status codes: 10 2xx' "$OUT/h2check.$t.log"; then
			case_fail h2 "$t" "10 GETs over h2 did not all succeed: $(lastlines "$OUT/h2check.$t.log")"
		fi
	done
	for c in "${H2_CASES[@]}"; do
		run_rounds "$c" gateway nginx
	done
fi

# The passthrough case last of the load cases: its tens of thousands of
# short connections leave as many sockets in TIME_WAIT (see Order).
if case_wanted tls && [[ -z ${L4_FAILED[tls]:-} ]]; then
	for t in $(l4_targets); do
		if ! taskset -c "$LOAD_CPU" "$BIN/tcpload" tls -addr "127.0.0.1:${TLSP_PORT[$t]}" -sni "$TLS_SNI" -ca "$TLS_CERT" \
			-conns 1 -duration 500ms >"$OUT/tlscheck.$t.log" 2>&1 || ! grep -q '^errors=0$' "$OUT/tlscheck.$t.log" ||
			grep -q '^requests=0$' "$OUT/tlscheck.$t.log"; then
			case_fail tls "$t" "TLS connections to $TLS_SNI did not complete: $(lastlines "$OUT/tlscheck.$t.log")"
		fi
	done
	for c in "${TLS_CASES[@]}"; do
		run_rounds "$c" gateway haproxy
	done
fi

# ---------------------------------------------------------------- memory

# hold_idle_conns TARGET: RSS while idleconns holds IDLE_N[TARGET] connections.
hold_idle_conns() {
	local t=$1 n=${IDLE_N[$1]} ic i out=$OUT/idleconns.$1.out
	log "$t: opening $n idle keep-alive connections"
	taskset -c "$LOAD_CPU" "$BIN/idleconns" -addr "127.0.0.1:${PORT[$t]}" -path /small -n "$n" \
		-timeout 60s >"$out" 2>"$OUT/idleconns.$t.err" &
	ic=$!
	STARTED+=("$ic")
	for ((i = 0; i < 1800; i++)); do # 90 s bound
		grep -q '^ready ' "$out" 2>/dev/null && break
		alive "$ic" || break
		sleep 0.05
	done
	if ! grep -q '^ready ' "$out" 2>/dev/null; then
		stop "$ic"
		PROBLEMS+=("$t: idle-connection test did not complete: $(lastlines "$OUT/idleconns.$t.err")")
		return 0
	fi
	# Right after the last connection's request, then once they have all
	# been idle for IDLE_HOLD seconds: a server may let go of what an idle
	# connection does not need only after a while (the gateway parks a
	# connection idle for 1-2 s; bench/README.md, Memory).
	if alive "${PID[$t]}"; then
		RSS_OPENED[$t]=$(tree_kib "${PID[$t]}" VmRSS)
	fi
	sleep "$IDLE_HOLD"
	if alive "${PID[$t]}"; then
		RSS_CONNS[$t]=$(tree_kib "${PID[$t]}" VmRSS)
	fi
	CONNS_OPENED[$t]=$(sed -n 's/^ready opened=\([0-9]*\).*/\1/p' "$out")
	stop "$ic"
	CONNS_OPEN_AT_END[$t]=$(sed -n 's/^exit open=\([0-9]*\).*/\1/p' "$out")
	log "$t: ${RSS_OPENED[$t]:-?} KiB just opened, ${RSS_CONNS[$t]:-?} KiB after ${IDLE_HOLD}s idle, with ${CONNS_OPENED[$t]:-0} connections (${CONNS_OPEN_AT_END[$t]:-?} still open at the end)"
	if ((${CONNS_OPENED[$t]:-0} < n)); then
		PROBLEMS+=("$t: held only ${CONNS_OPENED[$t]:-0} of $n idle connections: $(lastlines "$OUT/idleconns.$t.err")")
	fi
	alive "${PID[$t]}" || fail "$t" "exited during the idle-connection test: $(lastlines "${LOG_OF[$t]}")"
}

# After the load cases: closing 10,000 connections leaves as many sockets in
# TIME_WAIT for a minute, and load measured meanwhile ran measurably slower
# (bench/README.md, Order). The reference proxy has no memory goal, so it
# skips this test and the time it takes.
for t in "${PROXIES[@]}"; do
	case_wanted memory || break
	[[ $t == fasthttp ]] && continue
	running "$t" && hold_idle_conns "$t"
done

for t in "${PROXIES[@]}"; do
	running "$t" && RSS_PEAK[$t]=$(tree_kib "${PID[$t]}" VmHWM)
done

# MCP: tools/call straight to the MCP server and through the gateway.
if case_wanted mcp && running gateway && [[ -n $MCP_PID ]]; then
	log "measuring MCP tools/call"
	taskset -c "$LOAD_CPU" "$BIN/mcpbench" measure -direct "http://127.0.0.1:$MCP_TARGET_PORT/mcp" \
		-gateway "http://127.0.0.1:$GW_MCP_PORT/mcp" -out "$OUT/mcp.md" >"$OUT/mcpbench.log" 2>&1 ||
		PROBLEMS+=("mcp: $(lastlines "$OUT/mcpbench.log")")
fi

# ---------------------------------------------------------------- access logs

# Stop the proxies (SIGTERM: each flushes its buffered lines), then count
# the lines each wrote, to show in RESULTS.md that every target logged
# every request. A few of each file are kept as samples.
for t in "${PROXIES[@]}"; do
	[[ -n ${PID[$t]:-} ]] && stop "${PID[$t]}"
	[[ -n ${HELPER[$t]:-} ]] && stop "${HELPER[$t]}"
	logfile=${ACCESS_FILE[$t]}
	touch "$logfile"
	if [[ $t == gateway ]]; then
		# Its standard error: access lines ("INFO<tab>access<tab>") and the
		# process log, kept in gateway.log without the former. The MCP
		# case's requests (path /mcp) are not counted in SENT.
		LOG_LINES[$t]=$(grep $'\taccess\t' "$logfile" | grep -vc '"path": "/mcp"' || true)
		grep -v $'\taccess\t' "$logfile" >"$OUT/gateway.log" || true
		samples=$(grep -m 3 $'\taccess\t' "$logfile" || true)
	else
		LOG_LINES[$t]=$(wc -l <"$logfile")
		samples=$(head -n 3 "$logfile")
	fi
	SENT[$t]=$((${SENT[$t]:-0} + ${CONNS_OPENED[$t]:-0})) # one request per idle connection
	[[ $ACCESS_LOG == on ]] && printf '== %s: %s lines\n%s\n' "$t" "${LOG_LINES[$t]:-0}" "$samples" >>"$OUT/access-log-samples.txt"
done

# The access log's cost in instructions, gateway beside nginx (its own
# processes under callgrind, after the load cases so it disturbs none).
if case_wanted cost && wanted gateway && wanted nginx && ((!SKIP_GATEWAY)) && [[ -n ${GATEWAY:-} ]]; then
	log "counting the access log's instructions (callgrind)"
	bash "$BENCH_DIR/logcost.sh" "$BIN" "$GATEWAY" "$OUT/logcost.md" "$TMP/logcost" >"$OUT/logcost.log" 2>&1 ||
		PROBLEMS+=("logcost: $(lastlines "$OUT/logcost.log")")
fi

# The LLM work in instructions and simulated cache misses (its own gateway
# process under callgrind, after the load cases).
if case_wanted cost && wanted gateway && ((!SKIP_GATEWAY)) && [[ -n ${GATEWAY:-} ]]; then
	log "counting the LLM work's instructions (callgrind)"
	bash "$BENCH_DIR/llmcost.sh" "$BIN" "$GATEWAY" "$OUT/llmcost.md" "$TMP/llmcost" >"$OUT/llmcost.log" 2>&1 ||
		PROBLEMS+=("llmcost: $(lastlines "$OUT/llmcost.log")")
fi

# ---------------------------------------------------------------- report

first() { "$@" 2>&1 | head -n 1 || true; }
command_line="BENCH_DURATION=$DURATION BENCH_ROUNDS=$ROUNDS BENCH_WARMUP=$WARMUP BENCH_IDLE_CONNS=$IDLE_CONNS BENCH_IDLE_HOLD=$IDLE_HOLD"
command_line+=" BENCH_ACCESS_LOG=$ACCESS_LOG BENCH_LLM_RATE=$LLM_RATE"
command_line+=" BENCH_TCP_BYTES=$TCP_BYTES BENCH_TCP_CONNS=$TCP_CONNS BENCH_TLS_CONNS=$TLS_CONNS"
command_line+=" BENCH_HTTPS_CONNS=$HTTPS_CONNS BENCH_H2_CONNS=$H2_CONNS BENCH_H2_STREAMS=$H2_STREAMS"
[[ $TARGETS != "$ALL_TARGETS" ]] && command_line+=" BENCH_TARGETS='$TARGETS'"
[[ $BENCH_CASE_GROUPS != "$ALL_CASES" ]] && command_line+=" BENCH_CASES='$BENCH_CASE_GROUPS'"
command_line+=" bench/run.sh${*:+ $*}"
{
	echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "nproc=$(nproc)"
	echo "cpu_model=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)"
	echo "kernel=$(uname -sr)"
	echo "go=$(go env GOVERSION)"
	echo "nginx=$(first nginx -v | sed 's|^nginx version: nginx/||')"
	echo "haproxy=$(first haproxy -v | awk '{ print $3 }')"
	echo "fasthttp=$(cd "$ROOT" && first go list -m -f '{{.Version}}' github.com/valyala/fasthttp)"
	echo "vegeta=$(cd "$ROOT" && first go list -m -f '{{.Version}}' github.com/tsenart/vegeta/v12)"
	echo "wrk=$(first wrk -v | awk '{ print $2 }')"
	echo "h2load=$(first h2load --version | awk '{ print $NF }')"
	echo "openssl=$(first openssl version | awk '{ print $2 }')"
	echo "command=$command_line"
	echo "duration=$DURATION"
	echo "rounds=$ROUNDS"
	echo "warmup=$WARMUP"
	echo "idle_conns=$IDLE_CONNS"
	echo "idle_hold=${IDLE_HOLD}s"
	echo "proxy_cpu=$PROXY_CPU"
	echo "load_cpu=$LOAD_CPU"
	echo "upstream_cpu=$UPSTREAM_CPU"
	echo "access_log=$ACCESS_LOG"
	echo "llm_rate=$LLM_RATE"
	echo "cases=$BENCH_CASE_GROUPS"
	echo "tcp_bytes=$TCP_BYTES"
	echo "tcp_conns=$TCP_CONNS"
	echo "tls_conns=$TLS_CONNS"
	echo "https_conns=$HTTPS_CONNS"
	echo "h2_conns=$H2_CONNS"
	echo "h2_streams=$H2_STREAMS"
	for k in "${!TLS_PARAMS[@]}"; do
		echo "tls_params.$k=${TLS_PARAMS[$k]}"
	done
} >"$OUT/meta.txt"

for t in $TARGETS; do
	{
		echo "status=${STATUS[$t]:-}"
		echo "note=${NOTE[$t]:-}" | tr -d '\r'
		echo "rss_idle_kib=${RSS_IDLE[$t]:-}"
		echo "rss_opened_kib=${RSS_OPENED[$t]:-}"
		echo "rss_conns_kib=${RSS_CONNS[$t]:-}"
		echo "rss_peak_kib=${RSS_PEAK[$t]:-}"
		echo "conns_opened=${CONNS_OPENED[$t]:-}"
		echo "conns_open_at_end=${CONNS_OPEN_AT_END[$t]:-}"
		if [[ $ACCESS_LOG == on && $t != direct ]]; then
			echo "access_log_lines=${LOG_LINES[$t]:-}"
			echo "requests_sent=${SENT[$t]:-}"
		fi
	} >"$OUT/targets/$t.txt"
done

"$BIN/report" -dir "$OUT" -out "$RESULTS" || die "rendering $RESULTS failed"
[[ -s $OUT/mcp.md ]] && cat "$OUT/mcp.md" >>"$RESULTS"
[[ -s $OUT/logcost.md ]] && cat "$OUT/logcost.md" >>"$RESULTS"
[[ -s $OUT/llmcost.md ]] && cat "$OUT/llmcost.md" >>"$RESULTS"
log "wrote $RESULTS (raw output in $OUT)"
busiest=$(cat "$OUT"/wrk/*.load 2>/dev/null | sed -n 's/^other_cpu_pct=//p' | sort -n | tail -n 1)
if ((${busiest:-0} > 10)); then
	log "warning: other processes used up to ${busiest}% of a CPU during a run; the numbers are disturbed"
fi

if ((${#PROBLEMS[@]})); then
	log "problems:"
	printf '  - %s\n' "${PROBLEMS[@]}" >&2
	exit 1
fi
