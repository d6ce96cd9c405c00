#!/bin/sh
# Load test of `specdec serve` on loopback: LOAD_CLIENTS clients (default 64) each send streamed completions one
# after another for LOAD_SECONDS (default 300), mixing plain, n-gram and draft-model requests. Passes when every
# request is answered (200, a stream ending with [DONE]), the server is alive and idle afterwards (no live session,
# no KV cell in use, empty queue) and its memory falls back toward the idle level (within 8 MiB + a quarter of what
# the load added). Reports requests/s, tokens/s, p50/p99 time to the first byte and per token
# after it, and the server's resident memory idle / after. `make loadtest` (5 min), `make loadtest-short` (30 s).
# LOAD_PARALLEL (8), LOAD_TOKENS (64 per request), LOAD_THREADS (the server's -t), LOAD_MODEL. Timings depend on
# the machine and its load; they are printed, never checked.
BUILD=${BUILD:-build}
SHARED=${SHARED:-../shared}
CLI=$BUILD/specdec
TGT=${LOAD_MODEL:-$SHARED/models/stories-ee.gguf}
DRAFT=$SHARED/models/stories260K.gguf
CLIENTS=${LOAD_CLIENTS:-64}
SECS=${LOAD_SECONDS:-300}
PAR=${LOAD_PARALLEL:-8}
NTOK=${LOAD_TOKENS:-64}
THREADS=${LOAD_THREADS:+-t $LOAD_THREADS}
for tool in curl jq awk; do
    command -v $tool >/dev/null 2>&1 || { echo "loadtest: $tool is not installed"; exit 1; }
done
TMP=$(mktemp -d)
SPID=""
cleanup() {
    [ -n "$SPID" ] && kill "$SPID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

: >"$TMP/server.log" # there before the first read below (the server's redirection may come later)
$CLI serve -m "$TGT" --draft-model "$DRAFT" --port 0 --parallel "$PAR" $THREADS --queue-limit $((CLIENTS + 8)) -c 1024 \
    >/dev/null 2>"$TMP/server.log" &
SPID=$!
PORT=""
i=0
while [ $i -lt 300 ] && [ -z "$PORT" ]; do
    PORT=$(sed -n 's/.*ready on http:\/\/[0-9.]*:\([0-9][0-9]*\).*/\1/p' "$TMP/server.log")
    kill -0 "$SPID" 2>/dev/null || { cat "$TMP/server.log"; exit 1; }
    [ -n "$PORT" ] || sleep 0.1
    i=$((i + 1))
done
[ -n "$PORT" ] || { echo "loadtest: the server did not start"; exit 1; }
U=http://127.0.0.1:$PORT
rss() { awk '/^VmRSS/ { print int($2 / 1024) }' "/proc/$SPID/status" 2>/dev/null; }
metric() { curl -s --max-time 10 "$U/metrics" | sed -n "s/^$1 //p"; }
curl -s --max-time 60 -o /dev/null "$U/v1/completions" -d '{"prompt": "Once upon a time", "max_tokens": 8}' # warm-up
RSS_IDLE=$(rss)
echo "loadtest: $CLIENTS clients for $SECS s against $U ($PAR parallel, $NTOK tokens per request); idle RSS $RSS_IDLE MiB"

# one client: streamed requests until the deadline; a line "status ttft total tokens done" per request
client() {
    c=$1 end=$2 k=0
    while [ "$(date +%s)" -lt "$end" ]; do
        case $(((c + k) % 3)) in 0) spec='{"method":"none"}' ;; 1) spec='{"method":"ngram","gamma":4}' ;;
                                 *) spec='{"method":"draft","gamma":3}' ;; esac
        body="{\"prompt\": \"Once upon a time there was a child number $c who\", \"max_tokens\": $NTOK, \"temperature\": 0.8,
               \"seed\": $k, \"stream\": true, \"stream_options\": {\"include_usage\": true}, \"speculative\": $spec}"
        w=$(curl -s -N --max-time 600 -o "$TMP/c$c.txt" -w '%{http_code} %{time_starttransfer} %{time_total}' "$U/v1/completions" -d "$body")
        toks=$(sed -n 's/^data: //p' "$TMP/c$c.txt" | grep '"usage"' | jq -r '.usage.completion_tokens' 2>/dev/null)
        last=$(sed -n 's/^data: //p' "$TMP/c$c.txt" | tail -n 1)
        echo "$w ${toks:-0} $([ "$last" = "[DONE]" ] && echo 1 || echo 0)" >>"$TMP/r$c.txt"
        k=$((k + 1))
    done
}
t0=$(date +%s)
end=$((t0 + SECS))
c=0
CPIDS=""
while [ $c -lt "$CLIENTS" ]; do
    client $c $end &
    CPIDS="$CPIDS $!"
    c=$((c + 1))
done
PEAK=0
while [ "$(date +%s)" -lt "$end" ]; do
    r=$(rss)
    [ -n "$r" ] && [ "$r" -gt "$PEAK" ] && PEAK=$r
    sleep 1
done
for p in $CPIDS; do wait "$p"; done
t1=$(date +%s)
i=0
while [ $i -lt 100 ]; do
    [ "$(metric specdec_live_sessions)" = 0 ] && [ "$(metric specdec_kv_cells_used)" = 0 ] && [ "$(metric specdec_queue_length)" = 0 ] && break
    sleep 0.1
    i=$((i + 1))
done
RSS_AFTER=$(rss)
cat "$TMP"/r*.txt >"$TMP/all.txt" 2>/dev/null
alive=0
kill -0 "$SPID" 2>/dev/null && alive=1
awk -v secs=$((t1 - t0)) -v alive=$alive -v idle=$i -v rss0="$RSS_IDLE" -v rss1="$RSS_AFTER" -v peak="$PEAK" '
    function pct(a, n, p,   k) { k = int(p * (n - 1) + 0.5); return a[k + 1] }
    function sort(a, n,   i, j, t) { for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t } }
    { n++; if ($1 == 200 && $5 == 1) good++; toks += $4; ttft[n] = $2; if ($4 > 1) { m++; tpot[m] = ($3 - $2) / ($4 - 1) } }
    END {
        sort(ttft, n); sort(tpot, m)
        printf "requests: %d, answered %d (%.1f/s); tokens: %d (%.1f/s)\n", n, good, n / secs, toks, toks / secs
        printf "time to first byte (the stream opens at once; tools/serve_bench.py times the first token): p50 %.3f s, p99 %.3f s; per token after it: p50 %.4f s, p99 %.4f s\n",
               pct(ttft, n, 0.5), pct(ttft, n, 0.99), pct(tpot, m, 0.5), pct(tpot, m, 0.99)
        printf "server RSS: idle %s MiB, peak %s MiB, after %s MiB (free KV pages go back to the OS when the server idles)\n", rss0, peak, rss1
        mem_ok = rss1 - rss0 <= 8 + (peak - rss0) / 4
        ok = n > 0 && good == n && alive && idle < 100 && mem_ok
        if (!mem_ok) print "FAIL: memory did not fall back toward the idle level"
        if (!alive) print "FAIL: the server died"
        if (good != n) printf "FAIL: %d requests not answered\n", n - good
        if (idle >= 100) print "FAIL: the server did not return to idle (live sessions, KV cells or queue)"
        exit ok ? 0 : 1
    }' "$TMP/all.txt"
rc=$?
echo "loadtest: $([ $rc -eq 0 ] && echo passed || echo FAILED)"
exit $rc
