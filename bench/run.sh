#!/usr/bin/env bash
# bench/run.sh: throughput, latency and memory of the gateway against nginx,
# HAProxy, a bare fasthttp proxy (the reference) and no proxy at all, written
# to bench/RESULTS.md. See bench/README.md.
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
  BENCH_TARGETS       subset of "direct gateway nginx haproxy fasthttp" [all five]
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
TARGETS=${BENCH_TARGETS:-direct gateway nginx haproxy fasthttp}
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
for t in $TARGETS; do
	case $t in direct | gateway | nginx | haproxy | fasthttp) ;; *) die "unknown target '$t' in BENCH_TARGETS" ;; esac
done
wanted() { [[ " $TARGETS " == *" $1 "* ]]; }

# ---------------------------------------------------------------- processes

declare -a STARTED=() # every background process this script started
declare -A PID=()     # target or role -> pid
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
	for cmd in nginx:nginx haproxy:haproxy wrk:wrk taskset:util-linux timeout:coreutils; do
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
declare -a PROBLEMS=()

# fail TARGET REASON: mark a target failed; the run goes on without it.
fail() {
	STATUS[$1]=failed
	NOTE[$1]=$2
	PROBLEMS+=("$1: $2")
	log "$1 FAILED: $2"
	if [[ -n ${PID[$1]:-} ]]; then
		stop "${PID[$1]}"
		unset "PID[$1]"
	fi
}

# lastlines FILE: the end of a log, on one line, for a report note.
lastlines() { tail -n 3 "$1" 2>/dev/null | tr '\n' ' ' | cut -c1-300; }

log "building helpers into $BIN"
(cd "$ROOT" && for p in upstream fastproxy idleconns freeport probe report mcpbench; do
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

mapfile -t ports < <("$BIN/freeport" -n 8)
((${#ports[@]} == 8)) || die "could not get free ports"
UPSTREAM_PORT=${ports[0]}
declare -A PORT=([direct]=${ports[0]} [gateway]=${ports[1]} [nginx]=${ports[3]} [haproxy]=${ports[4]} [fasthttp]=${ports[7]})
GW_READY_PORT=${ports[2]}
GW_MCP_PORT=${ports[5]}
MCP_TARGET_PORT=${ports[6]}

# render TEMPLATE DEST KEY=VALUE...: fill @KEY@ placeholders.
render() {
	local tmpl=$1 dest=$2 kv args=()
	shift 2
	for kv in "$@"; do args+=(-e "s|@${kv%%=*}@|${kv#*=}|g"); done
	sed "${args[@]}" "$tmpl" >"$dest"
	! grep -v '^[[:space:]]*#' "$dest" | grep -q '@[A-Z_]*@' || die "unfilled placeholder in $dest"
}

mkdir -p "$TMP/nginx"
render "$BENCH_DIR/nginx.conf.tmpl" "$TMP/nginx/nginx.conf" DIR="$TMP/nginx" PORT="${PORT[nginx]}" \
	UPSTREAM_PORT="$UPSTREAM_PORT" NOFILE="$NOFILE" WORKER_CONNECTIONS=$((NOFILE - 100))
# HAProxy refuses to start unless 2 * maxconn + a few fds fit the open-file
# limit, so with 20,000 fds it holds fewer than 10,000 idle connections.
HAPROXY_MAXCONN=$(((NOFILE - 100) / 2))
declare -A IDLE_N=([gateway]=$IDLE_CONNS [nginx]=$IDLE_CONNS
	[haproxy]=$((IDLE_CONNS < HAPROXY_MAXCONN - 50 ? IDLE_CONNS : HAPROXY_MAXCONN - 50)))
render "$BENCH_DIR/haproxy.cfg.tmpl" "$TMP/haproxy.cfg" PORT="${PORT[haproxy]}" \
	UPSTREAM_PORT="$UPSTREAM_PORT" MAXCONN="$HAPROXY_MAXCONN"
cp "$TMP/nginx/nginx.conf" "$TMP/haproxy.cfg" "$BENCH_DIR/gateway.yaml" "$OUT/"

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

start_gateway() {
	GW_PORT=${PORT[gateway]} GW_READY_PORT=$GW_READY_PORT UPSTREAM_PORT=$UPSTREAM_PORT \
		GW_MCP_PORT=$GW_MCP_PORT MCP_TARGET_PORT=$MCP_TARGET_PORT \
		taskset -c "$PROXY_CPU" "$GATEWAY" -f "$BENCH_DIR/gateway.yaml" >"$OUT/gateway.log" 2>&1 &
	PID[gateway]=$!
	STARTED+=("$!")
	if ! probe "${PID[gateway]}" "http://127.0.0.1:$GW_READY_PORT/healthz/ready"; then
		fail gateway "not ready: $(lastlines "$OUT/probe.last") $(lastlines "$OUT/gateway.log")"
		return 1
	fi
	check_proxy gateway
}

start_nginx() {
	taskset -c "$PROXY_CPU" nginx -e "$TMP/nginx/error.log" -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" \
		>"$OUT/nginx.log" 2>&1 &
	PID[nginx]=$!
	STARTED+=("$!")
	check_proxy nginx || { cp "$TMP/nginx/error.log" "$OUT/nginx-error.log" 2>/dev/null; return 1; }
}

start_haproxy() {
	taskset -c "$PROXY_CPU" haproxy -db -f "$TMP/haproxy.cfg" >"$OUT/haproxy.log" 2>&1 &
	PID[haproxy]=$!
	STARTED+=("$!")
	check_proxy haproxy || { cp "$OUT/haproxy.log" "$OUT/haproxy-failed.log"; return 1; }
}

# The reference: fasthttp's Server and HostClient and nothing else.
start_fasthttp() {
	taskset -c "$PROXY_CPU" "$BIN/fastproxy" -addr "127.0.0.1:${PORT[fasthttp]}" \
		-upstream "127.0.0.1:$UPSTREAM_PORT" >"$OUT/fasthttp.log" 2>&1 &
	PID[fasthttp]=$!
	STARTED+=("$!")
	check_proxy fasthttp
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

PROXIES=()
for t in gateway nginx haproxy fasthttp; do
	wanted "$t" || continue
	[[ $t == gateway && -z $GATEWAY ]] && continue
	log "starting $t on 127.0.0.1:${PORT[$t]} (CPU $PROXY_CPU)"
	if "start_$t"; then
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

# measure CASE TARGET PATH CONNS ROUND: the recorded wrk run of one round,
# after a warm-up in the first.
measure() {
	local c=$1 t=$2 url=http://127.0.0.1:${PORT[$2]}$3 conns=$4 round=$5 base=$OUT/wrk/$1.$2.r$5
	local wrk=(taskset -c "$LOAD_CPU" wrk -t1 "-c$conns" --latency)
	running "$t" || return 0 # failed earlier: already reported
	if ! alive "${PID[$t]}"; then
		echo "$t is not running" >"$base.err"
		fail "$t" "exited before $c: $(lastlines "$OUT/$t.log")"
		return 0
	fi
	if ((round == 1)); then
		log "$c: $t ($conns conns, warm-up $WARMUP, then $ROUNDS rounds of $DURATION)"
		interruptible timeout -k 5 $(($(secs "$WARMUP") + 30)) "${wrk[@]}" "-d$WARMUP" "$url" >/dev/null 2>&1 || true
	fi
	local ours=("${PID[direct]}") before ticks
	[[ $t == direct ]] || ours+=("${PID[$t]}")
	cpu_snapshot "${ours[@]}"
	before=$SNAP
	ticks=$(proc_ticks "${PID[$t]}") # the target's own (direct's: the upstream's)
	if ! interruptible timeout -k 5 $(($(secs "$DURATION") + 30)) "${wrk[@]}" "-d$DURATION" "$url" >"$base.txt" 2>"$base.stderr"; then
		echo "wrk failed: $(lastlines "$base.stderr") $(lastlines "$base.txt")" >"$base.err"
		rm -f "$base.txt"
	fi
	ticks=$(($(proc_ticks "${PID[$t]}") - ticks))
	cpu_snapshot "${ours[@]}"
	{
		echo "other_cpu_pct=$(other_cpu_pct "$before" "$SNAP")"
		# Negative only if the target died meanwhile (reported as failed).
		((ticks < 0)) || echo "target_cpu_us=$((ticks * 1000000 / CLK_TCK))"
	} >"$base.load"
	alive "${PID[$t]}" || fail "$t" "exited during $c: $(lastlines "$OUT/$t.log")"
}

# Case IDs must match bench/report/results.go. Within a case the targets take
# turns round after round, direct first, then the proxies in an order rotated
# from round to round, so neither the machine's drift nor running right after
# direct favours one proxy; the report takes each target's median round.
order=(gateway nginx haproxy fasthttp)
for spec in small-c50:/small:50 1m-c10:/1m:10 small-c1:/small:1; do
	IFS=: read -r c path conns <<<"$spec"
	for ((round = 1; round <= ROUNDS; round++)); do
		for t in direct "${order[@]}"; do
			wanted "$t" || continue
			[[ ${STATUS[$t]} == skipped ]] && continue
			measure "$c" "$t" "$path" "$conns" "$round"
		done
		order=("${order[@]:1}" "${order[0]}")
	done
done

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
	alive "${PID[$t]}" || fail "$t" "exited during the idle-connection test: $(lastlines "$OUT/$t.log")"
}

# After the load cases: closing 10,000 connections leaves as many sockets in
# TIME_WAIT for a minute, and load measured meanwhile ran measurably slower
# (bench/README.md, Order). The reference proxy has no memory goal, so it
# skips this test and the time it takes.
for t in "${PROXIES[@]}"; do
	[[ $t == fasthttp ]] && continue
	running "$t" && hold_idle_conns "$t"
done

for t in "${PROXIES[@]}"; do
	running "$t" && RSS_PEAK[$t]=$(tree_kib "${PID[$t]}" VmHWM)
done

# ---------------------------------------------------------------- report

first() { "$@" 2>&1 | head -n 1 || true; }
command_line="BENCH_DURATION=$DURATION BENCH_ROUNDS=$ROUNDS BENCH_WARMUP=$WARMUP BENCH_IDLE_CONNS=$IDLE_CONNS BENCH_IDLE_HOLD=$IDLE_HOLD"
[[ $TARGETS != "direct gateway nginx haproxy fasthttp" ]] && command_line+=" BENCH_TARGETS='$TARGETS'"
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
	echo "wrk=$(first wrk -v | awk '{ print $2 }')"
	echo "command=$command_line"
	echo "duration=$DURATION"
	echo "rounds=$ROUNDS"
	echo "warmup=$WARMUP"
	echo "idle_conns=$IDLE_CONNS"
	echo "idle_hold=${IDLE_HOLD}s"
	echo "proxy_cpu=$PROXY_CPU"
	echo "load_cpu=$LOAD_CPU"
	echo "upstream_cpu=$UPSTREAM_CPU"
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
	} >"$OUT/targets/$t.txt"
done

# MCP: tools/call straight to an MCP server and through the gateway.
if running gateway; then
	taskset -c "$UPSTREAM_CPU" "$BIN/mcpbench" serve -addr "127.0.0.1:$MCP_TARGET_PORT" >"$OUT/mcpbench-serve.log" 2>&1 &
	MCP_PID=$!
	STARTED+=("$MCP_PID")
	if probe "$MCP_PID" "http://127.0.0.1:$MCP_TARGET_PORT/ready"; then
		log "measuring MCP tools/call"
		taskset -c "$LOAD_CPU" "$BIN/mcpbench" measure -direct "http://127.0.0.1:$MCP_TARGET_PORT/mcp" \
			-gateway "http://127.0.0.1:$GW_MCP_PORT/mcp" -out "$OUT/mcp.md" >"$OUT/mcpbench.log" 2>&1 ||
			PROBLEMS+=("mcp: $(lastlines "$OUT/mcpbench.log")")
	else
		PROBLEMS+=("mcp: the MCP target did not start: $(lastlines "$OUT/mcpbench-serve.log")")
	fi
fi

"$BIN/report" -dir "$OUT" -out "$RESULTS" || die "rendering $RESULTS failed"
[[ -s $OUT/mcp.md ]] && cat "$OUT/mcp.md" >>"$RESULTS"
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
