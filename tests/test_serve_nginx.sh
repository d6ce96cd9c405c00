#!/bin/sh
# Two `specdec serve` replicas behind nginx with deploy/nginx/specdec.conf (ports substituted), on loopback:
# answers through nginx equal generate's (JSON and streamed), both replicas serve, and when one is stopped the
# requests go to the other. Skipped when nginx, curl or jq is missing.
TEST=test_serve_nginx
. "$(dirname "$0")/lib.sh"
TGT=$SHARED/models/stories-ee.gguf
DRAFT=$SHARED/models/stories260K.gguf
NGINX=$(command -v nginx || ls /usr/sbin/nginx 2>/dev/null)
for tool in curl jq "$NGINX"; do
    if [ -z "$tool" ] || ! command -v "$tool" >/dev/null 2>&1; then
        skip "${tool:-nginx} is not installed (apt-get install nginx-light curl jq)"
    fi
done
watchdog 120

start_replica() { start_server "$1" -m "$TGT" --draft-model "$DRAFT" -t 1 --parallel 2 -c 512; }
start_replica "$TMP/r1.log" || { bad "replica 1: $(cat "$TMP/r1.log")"; finish; }
R1=$SPID P1=$PORT
start_replica "$TMP/r2.log" || { bad "replica 2: $(cat "$TMP/r2.log")"; finish; }
P2=$PORT

# nginx on a free port (tried until one binds)
mkdir -p "$TMP/ngx"
tries=0
NPORT=""
while [ $tries -lt 8 ] && [ -z "$NPORT" ]; do
    port=$((20000 + ($$ * 7 + tries * 7919 + ($(date +%s) % 60) * 131) % 40000))
    sed -e "s/127.0.0.1:8081/127.0.0.1:$P1/; s/127.0.0.1:8082/127.0.0.1:$P2/; s/listen 127.0.0.1:8080/listen 127.0.0.1:$port/" \
        deploy/nginx/specdec.conf >"$TMP/specdec.conf"
    {
        [ "$(id -u)" = 0 ] && echo "user root;"
        echo "worker_processes 1; pid $TMP/nginx.pid; error_log $TMP/nginx.err;"
        echo "events { worker_connections 256; }"
        echo "http { access_log off; client_body_temp_path $TMP/ngx/body; proxy_temp_path $TMP/ngx/proxy;"
        echo "       fastcgi_temp_path $TMP/ngx/fcgi; uwsgi_temp_path $TMP/ngx/uwsgi; scgi_temp_path $TMP/ngx/scgi;"
        echo "       include $TMP/specdec.conf; }"
    } >"$TMP/nginx.conf"
    "$NGINX" -p "$TMP" -c "$TMP/nginx.conf" -g 'daemon off;' 2>>"$TMP/nginx.err" &
    NPID=$!
    i=0
    while [ $i -lt 50 ]; do
        if curl -s --max-time 2 -o /dev/null "http://127.0.0.1:$port/health"; then NPORT=$port; break; fi
        kill -0 "$NPID" 2>/dev/null || break
        sleep 0.1
        i=$((i + 1))
    done
    if [ -n "$NPORT" ]; then PIDS="$PIDS $NPID"; else kill "$NPID" 2>/dev/null; wait "$NPID" 2>/dev/null; fi
    tries=$((tries + 1))
done
[ -n "$NPORT" ] || { bad "nginx did not start: $(cat "$TMP/nginx.err")"; finish; }
U=http://127.0.0.1:$NPORT

[ "$(curl -s --max-time 10 "$U/health")" = '{"status":"ok"}' ] && ok || bad "/health through nginx"
gen() { g=$($CLI generate -m "$TGT" -c 512 -t 1 -p "$1" -n "$2" --temp 0 $3 2>/dev/null); printf '%s' "${g#"$1"}"; }
body() { jq -nc --arg p "$1" --argjson n "$2" --argjson s "$3" --argjson st "${4:-false}" \
    '{prompt: $p, max_tokens: $n, temperature: 0, speculative: $s, stream: $st}'; }
sse_text() { sed -n 's/^data: //p' "$1" | grep -v '^\[DONE\]$' | jq -rj '.choices[0].text // empty'; }

exp_plain=$(gen "Once upon a time" 40 "")
exp_ngram=$(gen "Once upon a time" 40 "--spec ngram --gamma 4")
exp_draft=$(gen "Once upon a time" 40 "--spec draft --draft-model $DRAFT --gamma 3")
n_ok=0
for k in 1 2 3 4 5 6; do
    case $k in 1|4) spec='{"method":"none"}' exp=$exp_plain ;; 2|5) spec='{"method":"ngram","gamma":4}' exp=$exp_ngram ;;
               *) spec='{"method":"draft","gamma":3}' exp=$exp_draft ;; esac
    got=$(curl -s --max-time 60 "$U/v1/completions" -d "$(body "Once upon a time" 40 "$spec")" | jq -r '.choices[0].text')
    [ "$got" = "$exp" ] && n_ok=$((n_ok + 1))
done
[ $n_ok = 6 ] && ok || bad "answers through nginx: $n_ok/6 equal generate's"
curl -s -N --max-time 60 -o "$TMP/s.txt" "$U/v1/completions" -d "$(body "Once upon a time" 40 '{"method":"ngram","gamma":4}' true)"
[ "$(sse_text "$TMP/s.txt")" = "$exp_ngram" ] && [ "$(sed -n 's/^data: //p' "$TMP/s.txt" | tail -n 1)" = "[DONE]" ] &&
    ok || bad "stream through nginx: $(tail -c 300 "$TMP/s.txt")"
reqs() { curl -s --max-time 10 "http://127.0.0.1:$1/metrics" | awk '/^specdec_requests_total/ { n += $2 } END { print n + 0 }'; }
n1=$(reqs "$P1") n2=$(reqs "$P2")
[ "$n1" -gt 0 ] && [ "$n2" -gt 0 ] && [ $((n1 + n2)) -eq 7 ] && ok || bad "both replicas serve: $n1 + $n2 requests"

# replica 1 stops (SIGTERM, exits 0): every request still answered, by replica 2
kill -TERM "$R1"
wait "$R1"
rc=$?
[ $rc -eq 0 ] && ok || bad "replica 1 exit status $rc"
n_ok=0
for k in 1 2 3 4; do
    got=$(curl -s --max-time 60 "$U/v1/completions" -d "$(body "Once upon a time" 40 '{"method":"none"}')" | jq -r '.choices[0].text')
    [ "$got" = "$exp_plain" ] && n_ok=$((n_ok + 1))
done
[ $n_ok = 4 ] && [ "$(reqs "$P2")" -eq $((n2 + 4)) ] && ok || bad "after replica 1 stopped: $n_ok/4 answered"
finish
