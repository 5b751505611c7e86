#!/usr/bin/env bash
# bench/logcost.sh: what an access log line costs the gateway and nginx, in
# user-space instructions per request, counted by valgrind's callgrind
# (exact and repeatable, where CPU time on a shared VM swings by a third).
#
#   bench/logcost.sh BIN_DIR GATEWAY_BIN OUT_MD TMP_DIR
#
# BIN_DIR holds bench/run.sh's helpers (upstream, freeport, probe). Each
# target runs under callgrind twice, access log on and off (nginx:
# "combined buffer=64k flush=1s", as in bench/run.sh; gateway: its default
# access log), one worker (gateway GOMAXPROCS=1, nginx one process), and
# serves small GETs through to the upstream on one keep-alive connection:
# WARM requests first, then the counters are reset and MEASURE requests
# counted. The log's cost is the difference. Instructions leave out the
# kernel (the write(2) of the buffers) and cache misses: this is the work
# each does to make its lines, not their whole cost. Writes a Markdown
# section to OUT_MD.
set -euo pipefail

BIN=$1 GATEWAY=$2 OUT_MD=$3 TMP=$4
WARM=${LOGCOST_WARM:-1000}
MEASURE=${LOGCOST_REQUESTS:-10000}
mkdir -p "$TMP"

mapfile -t ports < <("$BIN/freeport" -n 3)
UP_PORT=${ports[0]} GW_PORT=${ports[1]} NGX_PORT=${ports[2]}
"$BIN/upstream" -addr "127.0.0.1:$UP_PORT" >"$TMP/upstream.log" 2>&1 &
UP_PID=$!
trap 'kill "$UP_PID" 2>/dev/null || true' EXIT
"$BIN/probe" -pid "$UP_PID" -url "http://127.0.0.1:$UP_PORT/small" -len 100 >/dev/null

cat >"$TMP/gateway.yaml" <<EOF
config:
  adminAddr: "off"
  statsAddr: "off"
  readinessAddr: "off"
  logging: { level: "\${GW_LOG_LEVEL}" }
binds:
- port: $GW_PORT
  listeners:
  - protocol: HTTP
    routes:
    - backends:
      - host: 127.0.0.1:$UP_PORT
EOF

# nginx_conf LOG: a one-process nginx proxying to the upstream.
nginx_conf() {
	mkdir -p "$TMP/nginx"
	cat <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
events { worker_connections 1024; }
http {
    access_log $1;
    client_body_temp_path $TMP/nginx;
    proxy_temp_path $TMP/nginx;
    fastcgi_temp_path $TMP/nginx;
    uwsgi_temp_path $TMP/nginx;
    scgi_temp_path $TMP/nginx;
    keepalive_requests 100000000;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    upstream up { server 127.0.0.1:$UP_PORT; keepalive 64; }
    server {
        listen 127.0.0.1:$NGX_PORT;
        location / { proxy_pass http://up; }
    }
}
EOF
}

# count TARGET LOG: instructions per request of TARGET with its access log
# LOG (on or off).
count() {
	local target=$1 log=$2 port pid out=$TMP/$1-$2.callgrind
	rm -f "$out"*
	case $target in
	gateway)
		port=$GW_PORT
		local level=info
		[[ $log == on ]] || level=info,access=off
		GW_LOG_LEVEL=$level # cpu.rdtscp=off: valgrind does not decode RDTSCP, which the Go runtime
		GW_LOG_LEVEL=$level # reads its clock with when a lock is contended (SIGILL, then a crash).
		GW_LOG_LEVEL=$level GOMAXPROCS=1 GOGC=off GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off \
			valgrind --tool=callgrind --log-file="$TMP/$target-$log.valgrind" --callgrind-out-file="$out" \
			"$GATEWAY" -f "$TMP/gateway.yaml" >/dev/null 2>"$TMP/$target-$log.access.log" &
		;;
	nginx)
		port=$NGX_PORT
		local spec=off
		[[ $log == on ]] && spec="$TMP/nginx/access.log combined buffer=64k flush=1s"
		nginx_conf "$spec" >"$TMP/nginx-$log.conf"
		valgrind --tool=callgrind --log-file="$TMP/$target-$log.valgrind" --callgrind-out-file="$out" \
			nginx -c "$TMP/nginx-$log.conf" -p "$TMP/nginx" >/dev/null 2>&1 &
		;;
	esac
	pid=$!
	local url=http://127.0.0.1:$port/small
	"$BIN/probe" -pid "$pid" -url "$url" -len 100 -timeout 120s -then "$WARM" >/dev/null
	callgrind_control --zero "$pid" >/dev/null 2>&1
	"$BIN/probe" -pid "$pid" -url "$url" -len 100 -timeout 600s -then "$((MEASURE - 1))" >/dev/null
	callgrind_control --dump "$pid" >/dev/null 2>&1
	kill -9 "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	local total
	total=$(sed -n 's/^summary: *//p' "$out".1 | awk '{ print $1 }')
	[[ -n $total ]] || {
		echo "logcost: no callgrind summary for $target ($log)" >&2
		return 1
	}
	echo $((total / MEASURE))
}

declare -A IR
for target in gateway nginx; do
	for log in on off; do
		IR[$target-$log]=$(count "$target" "$log")
	done
done

# inclusive FILE PATTERN: the instructions callgrind counted in the
# function matching PATTERN and all it called (its first listing; the
# whole listing is read, so that the pipe never breaks).
inclusive() {
	callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
		awk -v pat="$2" '!found && $0 ~ pat { gsub(",", "", $1); sum = $1; found = 1 } END { print sum + 0 }'
}

# The gateway's whole-process difference moves by several percent from run
# to run (the scheduler's and the poller's paths depend on timing, which
# valgrind changes). Its log's own code counts exactly: what record (the
# access record, then the writer) costs with the log on beyond what it
# costs with it off, plus the writer's goroutines.
rec_on=$(inclusive "$TMP/gateway-on.callgrind.1" 'server[.][(][*]bind[)][.]record [[]')
rec_off=$(inclusive "$TMP/gateway-off.callgrind.1" 'server[.][(][*]bind[)][.]record [[]')
writer=$(($(inclusive "$TMP/gateway-on.callgrind.1" 'lineSink[)][.]writeLoop [[]') + $(inclusive "$TMP/gateway-on.callgrind.1" 'lineSink[)][.]tickLoop [[]')))
OWN_GATEWAY=$(((rec_on - rec_off + writer) / MEASURE))

{
	echo
	echo "## Access log cost (instructions)"
	echo
	echo "User-space instructions per request, counted by callgrind (\`bench/logcost.sh\`): each proxy alone under valgrind, one worker (the gateway also with \`GOGC=off\`), one keep-alive connection, $MEASURE small GETs after $WARM of warm-up, access log on and off as in the load cases (nginx \`combined buffer=64k flush=1s\`, the gateway's default access log). They leave out the kernel (the buffers' \`write(2)\`) and cache misses. nginx's counts repeat exactly, so its difference is its log's cost. The gateway's whole-process counts move by several percent from run to run (its scheduler's paths depend on timing), so its log's own code is counted apart, exactly: what \`record\` costs with the log on beyond what it costs with it off (the access record and \`logline.AccessWriter\`), plus the writer's goroutines."
	echo
	echo "| target | log on | log off | difference | the access log's own code |"
	echo "|---|---:|---:|---:|---:|"
	g_diff=$((IR[gateway-on] - IR[gateway-off])) n_diff=$((IR[nginx-on] - IR[nginx-off]))
	printf '| gateway | %s | %s | %s | %s |\n' "${IR[gateway-on]}" "${IR[gateway-off]}" "$g_diff" "$OWN_GATEWAY"
	printf '| nginx | %s | %s | %s | %s |\n' "${IR[nginx-on]}" "${IR[nginx-off]}" "$n_diff" "$n_diff"
	if ((n_diff > 0)); then
		printf '\nThe gateway'"'"'s access line costs %s× the instructions of nginx'"'"'s.\n' "$(awk -v g="$OWN_GATEWAY" -v n="$n_diff" 'BEGIN { printf "%.2f", g / n }')"
	fi
} >"$OUT_MD"
