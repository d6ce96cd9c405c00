#!/bin/bash
# Issue 13 closing measurement: `specdec serve` (plain and a speculative method chosen per request) next to
# llama.cpp's llama-server (plain, and -md DRAFT --spec-type draft-simple), same GGUF, --parallel = clients, driven
# by the same load generator (tools/serve_bench.py). Engines interleaved; one server at a time; every server killed.
#   tools/serve_compare.sh [OUTDIR]     env: MODEL DRAFT LLAMA_BIN CLIENTS ("1 4 16") REPS (2) NTOK (64) THREADS (2)
#                                            SPEC (specdec's method JSON) LSPEC (llama-server's speculative flags)
#                                            RUN_TIMEOUT (s per run)
set -u
OUT=${1:-/tmp/serve_compare}
mkdir -p "$OUT"
MODEL=${MODEL:-/work/scratch/ee-w3072-f16.gguf}
DRAFT=${DRAFT:-../shared/models/stories260K.gguf}
LLAMA_BIN=${LLAMA_BIN:-/work/scratch/llama.cpp/build/bin}
CLIENTS=${CLIENTS:-"1 4 16"}
REPS=${REPS:-2}
NTOK=${NTOK:-64}
THREADS=${THREADS:-2}
SPEC=${SPEC:-'{"method":"draft","gamma":4}'}
LSPEC=${LSPEC:-"-md $DRAFT --spec-type draft-simple --spec-draft-n-max 4 --spec-draft-n-min 0"}
RUN_TIMEOUT=${RUN_TIMEOUT:-420}
PORT=18090
SP=""
stop() { [ -n "$SP" ] && kill "$SP" 2>/dev/null && wait "$SP" 2>/dev/null; SP=""; }
trap stop EXIT
trap 'exit 1' INT TERM
start() { # log-name command...
    local log=$1; shift
    "$@" >"$OUT/$log.out" 2>"$OUT/$log.err" &
    SP=$!
    for _ in $(seq 1200); do
        curl -sf "127.0.0.1:$PORT/health" >/dev/null && return 0
        kill -0 "$SP" 2>/dev/null || break
        sleep 0.1
    done
    echo "server $log did not start"; tail -5 "$OUT/$log.err"; stop; return 1
}
bench() { # label clients requests [spec]
    local label=$1 c=$2 r=$3 spec=${4:-}
    echo "# $(date -u +%T) load: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/results.jsonl"
    timeout "$RUN_TIMEOUT" python3 tools/serve_bench.py --url "http://127.0.0.1:$PORT" --clients "$c" --requests "$r" \
        --max-tokens "$NTOK" --ignore-eos ${spec:+--spec "$spec"} --label "$label" --dump "$OUT/requests.jsonl" |
        tee -a "$OUT/results.jsonl"
}
for rep in $(seq "$REPS"); do
    for c in $CLIENTS; do
        r=1; [ "$c" -eq 1 ] && r=2
        if start "specdec-c$c-r$rep" build/specdec serve -m "$MODEL" --draft-model "$DRAFT" --port $PORT --parallel "$c" \
            -t "$THREADS" -c 1024 --queue-limit 64; then
            bench "specdec plain c=$c rep=$rep" "$c" "$r" '{"method":"none"}'
            bench "specdec $SPEC c=$c rep=$rep" "$c" "$r" "$SPEC"
            curl -s "127.0.0.1:$PORT/metrics" >"$OUT/specdec-c$c-r$rep.metrics"
            stop
        fi
        if start "llama-plain-c$c-r$rep" "$LLAMA_BIN/llama-server" -m "$MODEL" --port $PORT -np "$c" -c $((c * 256)) \
            -t "$THREADS" -ngl 0 --no-webui; then
            bench "llama plain c=$c rep=$rep" "$c" "$r"
            stop
        fi
        # shellcheck disable=SC2086
        if start "llama-spec-c$c-r$rep" "$LLAMA_BIN/llama-server" -m "$MODEL" $LSPEC --port $PORT -np "$c" \
            -c $((c * 256)) -t "$THREADS" -ngl 0 --no-webui; then
            bench "llama draft c=$c rep=$rep" "$c" "$r"
            stop
        fi
    done
done
echo "done $(date -u +%T)"
