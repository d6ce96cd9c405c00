#!/bin/sh
# specdec serve, end to end over loopback: greedy answers (JSON and streamed, one at a time and 16 at once with
# mixed methods; SV; SpecDec++ heads for the draft model and SWIFT) equal `specdec generate --temp 0`; bad requests
# get the right status and the server keeps
# serving; a client that disconnects mid-stream frees its session; queue limit, timeout, API key, /health,
# /metrics, chat templates, SIGTERM drain. Servers listen on a free port (--port 0) and are killed on exit.
TEST=test_serve
. "$(dirname "$0")/lib.sh"
TGT=$SHARED/models/stories-ee.gguf
DRAFT=$SHARED/models/stories260K.gguf
CTX=8192
for tool in curl jq; do
    command -v $tool >/dev/null 2>&1 || skip "$tool is not installed (apt-get install $tool)"
done
# the whole test is bounded
watchdog 300

# gen PROMPT N ARGS...: the completion `specdec generate --temp 0` gives (the prompt stripped)
gen() {
    gen_p=$1 gen_n=$2
    shift 2
    gen_out=$($CLI generate -m "$TGT" -c $CTX -t 1 -p "$gen_p" -n "$gen_n" --temp 0 "$@" 2>/dev/null)
    printf '%s' "${gen_out#"$gen_p"}"
}
# body PROMPT N SPEC_JSON [STREAM]
body() { jq -nc --arg p "$1" --argjson n "$2" --argjson s "$3" --argjson st "${4:-false}" \
    '{prompt: $p, max_tokens: $n, temperature: 0, speculative: $s, stream: $st}'; }
# post PATH BODY OUTFILE: prints the status code
post() { curl -s --max-time 60 -o "$3" -w '%{http_code}' -H 'Content-Type: application/json' "$U$1" -d "$2"; }
# the text of a stream (completion or chat chunks)
sse_text() { sed -n 's/^data: //p' "$1" | grep -v '^\[DONE\]$' | jq -rj '.choices[0].text // .choices[0].delta.content // empty'; }
sse_last() { sed -n 's/^data: //p' "$1" | tail -n 1; }
metric() { curl -s --max-time 10 "$U/metrics" | sed -n "s/^$1 //p"; }
# expect_status WHAT CODE PATTERN PATH BODY: an error status with an OpenAI-style error body matching PATTERN
expect_status() {
    code=$(post "$4" "$5" "$TMP/err.json")
    if [ "$code" = "$2" ] && jq -e '.error.message and .error.type' "$TMP/err.json" >/dev/null 2>&1 &&
        grep -q -- "$3" "$TMP/err.json"; then ok; else bad "$1: status $code, body $(head -c 400 "$TMP/err.json")"; fi
}

# ---------------------------------------------------------------- the main server
if ! start_server "$TMP/main.log" -m "$TGT" -t 1 -c $CTX --parallel 4 --draft-model "$DRAFT" --chat-template chatml; then
    bad "server start: $(cat "$TMP/main.log")"
    finish
fi
MAIN=$SPID
U=http://127.0.0.1:$PORT

# /health, /v1/models
[ "$(curl -s --max-time 10 -w '%{http_code}' -o "$TMP/h.json" "$U/health")" = 200 ] && jq -e '.status == "ok"' "$TMP/h.json" >/dev/null &&
    ok || bad "/health: $(cat "$TMP/h.json")"
curl -s --max-time 10 "$U/v1/models" | jq -e '.object == "list" and .data[0].id == "stories-ee.gguf"' >/dev/null &&
    ok || bad "/v1/models"

# methods: the request's speculative object and the same method as generate flags
M1='{"method":"none"}';                 A1=""
M2='{"method":"ngram","gamma":4}';      A2="--spec ngram --gamma 4"
M3='{"method":"draft","gamma":3}';      A3="--spec draft --draft-model $DRAFT --gamma 3"
M4='{"method":"early-exit","exit":4}';  A4="--spec early-exit --exit-layer 4"
M5='{"method":"auto","candidates":["ngram","draft","early-exit"],"exits":[2,3]}'; A5="" # chosen per round: plain's text
P1="Once upon a time"
P2="Lily and Tom went to the park"
P3="The little dog was sad because"
P4="One day, a girl named Sue"

# one at a time, JSON and streamed
for m in 1 2 3 5; do
    eval "spec=\$M$m args=\$A$m"
    exp=$(gen "$P1" 60 $args)
    code=$(post /v1/completions "$(body "$P1" 60 "$spec")" "$TMP/r.json")
    got=$(jq -r '.choices[0].text' "$TMP/r.json")
    if [ "$code" = 200 ] && [ "$got" = "$exp" ]; then ok; else bad "greedy $spec: status $code, expected [$exp] got [$got]"; fi
    jq -e --argjson s "$spec" '.usage.method == $s.method and .usage.prompt_tokens > 0 and .usage.completion_tokens > 0
        and (.usage.draft_tokens | type == "number") and (.usage.accepted_tokens <= .usage.draft_tokens)
        and (.choices[0].finish_reason == "stop" or .choices[0].finish_reason == "length")' "$TMP/r.json" >/dev/null &&
        ok || bad "usage $spec: $(cat "$TMP/r.json")"
    code=$(post /v1/completions "$(body "$P1" 60 "$spec" true)" "$TMP/s.txt")
    got=$(sse_text "$TMP/s.txt")
    if [ "$code" = 200 ] && [ "$got" = "$exp" ] && [ "$(sse_last "$TMP/s.txt")" = "[DONE]" ]; then ok; else
        bad "streamed greedy $spec: status $code, expected [$exp] got [$got]"; fi
done
# draft tokens were proposed and counted
[ "$(metric 'specdec_draft_tokens_total{method="draft"}')" -gt 0 ] 2>/dev/null && ok || bad "draft tokens in /metrics"

# the default method (no --spec): auto, plain greedy's text; a request sampling with a seed of its own: plain
# decoding, the same text for the same seed; a request that names a method gets it, seed or not
exp=$(gen "$P2" 40)
code=$(post /v1/completions "{\"prompt\": \"$P2\", \"max_tokens\": 40, \"temperature\": 0}" "$TMP/r.json")
[ "$code" = 200 ] && [ "$(jq -r '.choices[0].text' "$TMP/r.json")" = "$exp" ] && [ "$(jq -r .usage.method "$TMP/r.json")" = auto ] &&
    ok || bad "default method auto: $code $(cat "$TMP/r.json")"
seeded="{\"prompt\": \"$P2\", \"max_tokens\": 40, \"temperature\": 0.9, \"seed\": 7}"
code=$(post /v1/completions "$seeded" "$TMP/r1.json")
code2=$(post /v1/completions "$seeded" "$TMP/r2.json")
[ "$code$code2" = 200200 ] && [ "$(jq -r .usage.method "$TMP/r1.json")" = none ] &&
    [ "$(jq -r '.choices[0].text' "$TMP/r1.json")" = "$(jq -r '.choices[0].text' "$TMP/r2.json")" ] &&
    ok || bad "seeded sampling by default: plain and reproducible: $code $code2 $(cat "$TMP/r1.json") $(cat "$TMP/r2.json")"
code=$(post /v1/completions "{\"prompt\": \"$P2\", \"max_tokens\": 8, \"temperature\": 0.9, \"seed\": 7, \"speculative\": {\"method\": \"auto\"}}" "$TMP/r.json")
[ "$code" = 200 ] && [ "$(jq -r .usage.method "$TMP/r.json")" = auto ] && ok || bad "seeded, auto named: $code $(cat "$TMP/r.json")"
code=$(post /v1/completions "{\"prompt\": \"$P2\", \"max_tokens\": 8, \"temperature\": 0.9}" "$TMP/r.json")
[ "$code" = 200 ] && [ "$(jq -r .usage.method "$TMP/r.json")" = auto ] && ok || bad "sampled without a seed: auto: $code $(cat "$TMP/r.json")"
# auto's candidates in /metrics: the rounds they ran, and why
curl -s --max-time 10 "$U/metrics" | awk '/^specdec_auto_rounds_total\{/ { n += $2 } END { exit !(n > 0) }' && ok ||
    bad "auto's rounds in /metrics: $(curl -s --max-time 10 "$U/metrics" | grep specdec_auto)"

# 16 at once, mixed methods and prompts (half streamed), each equal to generate alone
i=0
CPIDS=""
for p in 1 2 3 4; do
    for m in 1 2 3 4; do
        eval "prompt=\$P$p spec=\$M$m args=\$A$m"
        st=false
        [ $(((p + m) % 2)) -eq 0 ] && st=true
        gen "$prompt" 48 $args >"$TMP/exp.$i"
        echo "$st" >"$TMP/st.$i"
        curl -s --max-time 120 -o "$TMP/out.$i" "$U/v1/completions" -d "$(body "$prompt" 48 "$spec" $st)" &
        CPIDS="$CPIDS $!"
        i=$((i + 1))
    done
done
for p in $CPIDS; do wait "$p"; done
i=0
while [ $i -lt 16 ]; do
    if [ "$(cat "$TMP/st.$i")" = true ]; then got=$(sse_text "$TMP/out.$i"); else got=$(jq -r '.choices[0].text' "$TMP/out.$i"); fi
    exp=$(cat "$TMP/exp.$i")
    [ "$got" = "$exp" ] && ok || bad "concurrent request $i: expected [$exp] got [$got] ($(head -c 300 "$TMP/out.$i"))"
    i=$((i + 1))
done

# chat: the chatml rendering of the messages, continued as generate would
sys="You tell stories."
user="Once upon a time"
nl='
'
chat_prompt="<|im_start|>system${nl}${sys}<|im_end|>${nl}<|im_start|>user${nl}${user}<|im_end|>${nl}<|im_start|>assistant${nl}"
exp=$(gen "$chat_prompt" 40)
cbody=$(jq -nc --arg s "$sys" --arg u "$user" '{model: "x", messages: [{role: "system", content: $s}, {role: "user", content: $u}], max_tokens: 40, temperature: 0}')
code=$(post /v1/chat/completions "$cbody" "$TMP/c.json")
got=$(jq -r '.choices[0].message.content' "$TMP/c.json")
if [ "$code" = 200 ] && [ "$got" = "$exp" ] && jq -e '.object == "chat.completion" and .choices[0].message.role == "assistant"' "$TMP/c.json" >/dev/null; then ok; else
    bad "chat: status $code, expected [$exp] got [$got]"; fi
code=$(post /v1/chat/completions "$(echo "$cbody" | jq -c '.stream = true | .stream_options = {include_usage: true}')" "$TMP/cs.txt")
got=$(sse_text "$TMP/cs.txt")
if [ "$code" = 200 ] && [ "$got" = "$exp" ] && grep -q '"role":"assistant"' "$TMP/cs.txt" && grep -q '"usage":{"prompt_tokens"' "$TMP/cs.txt" &&
    [ "$(sse_last "$TMP/cs.txt")" = "[DONE]" ]; then ok; else bad "streamed chat: expected [$exp] got [$got]"; fi
# stop strings: the text ends before the first stop string, finish_reason stop
full=$(gen "$P1" 60)
stop_word="Lily"
code=$(post /v1/completions "$(body "$P1" 60 "$M1" | jq -c --arg s "$stop_word" '.stop = [$s]')" "$TMP/r.json")
got=$(jq -r '.choices[0].text' "$TMP/r.json")
[ "$code" = 200 ] && [ "$got" = "${full%%"$stop_word"*}" ] && jq -e '.choices[0].finish_reason == "stop"' "$TMP/r.json" >/dev/null &&
    ok || bad "stop string: [$got] vs [${full%%"$stop_word"*}]"
code=$(post /v1/completions "$(body "$P1" 60 "$M2" true | jq -c --arg s "$stop_word" '.stop = $s')" "$TMP/s.txt")
[ "$(sse_text "$TMP/s.txt")" = "${full%%"$stop_word"*}" ] && ok || bad "streamed stop string: [$(sse_text "$TMP/s.txt")]"

# ---------------------------------------------------------------- bad requests: the right status, then it still serves
expect_status "malformed JSON" 400 invalid_json /v1/completions '{"prompt": "x",'
expect_status "not an object" 400 invalid_json /v1/completions '[1, 2]'
expect_status "trailing data" 400 invalid_json /v1/completions '{"prompt": "x"} x'
expect_status "prompt of the wrong type" 400 invalid_type /v1/completions '{"prompt": 5}'
expect_status "temperature of the wrong type" 400 "'temperature' must be a number" /v1/completions '{"prompt": "x", "temperature": "hot"}'
expect_status "stream of the wrong type" 400 invalid_type /v1/completions '{"prompt": "x", "stream": "yes"}'
expect_status "negative max_tokens" 400 max_tokens /v1/completions '{"prompt": "x", "max_tokens": -5}'
expect_status "fractional max_tokens" 400 max_tokens /v1/completions '{"prompt": "x", "max_tokens": 2.5}'
expect_status "top_p out of range" 400 top_p /v1/completions '{"prompt": "x", "top_p": 3}'
expect_status "n = 2" 400 "only n = 1" /v1/completions '{"prompt": "x", "n": 2}'
expect_status "missing prompt" 400 "'prompt' is required" /v1/completions '{"max_tokens": 4}'
expect_status "unknown method" 400 "unknown speculative method 'magic'" /v1/completions '{"prompt": "x", "speculative": {"method": "magic"}}'
expect_status "unknown knob" 400 "unknown key 'bogus'" /v1/completions '{"prompt": "x", "speculative": {"method": "ngram", "bogus": 1}}'
expect_status "knob of another method" 400 "does not apply to method ngram" /v1/completions '{"prompt": "x", "speculative": {"method": "ngram", "exit": 2}}'
expect_status "knob out of range" 400 "gamma=0" /v1/completions '{"prompt": "x", "speculative": {"method": "ngram", "gamma": 0}}'
expect_status "knob of the wrong type" 400 invalid_type /v1/completions '{"prompt": "x", "speculative": {"method": "ngram", "gamma": true}}'
expect_status "exit layer past the model" 400 "exit layer must be in" /v1/completions '{"prompt": "x", "speculative": {"method": "early-exit", "exit": 100}}'
expect_status "sv without a profile" 400 "SV profile" /v1/completions '{"prompt": "x", "speculative": {"method": "draft", "verify": "sv"}}'
expect_status "messages of the wrong type" 400 invalid_type /v1/chat/completions '{"messages": "hi"}'
expect_status "bad role" 400 role /v1/chat/completions '{"messages": [{"role": "wizard", "content": "hi"}]}'
long=$(printf 'Once upon a time %.0s' $(seq 2200))
expect_status "prompt over the context" 400 "but the context holds $CTX" /v1/completions "$(jq -nc --arg p "$long" '{prompt: $p}')"
expect_status "prompt + max_tokens over the context" 400 "context holds $CTX tokens, but" /v1/completions '{"prompt": "Once", "max_tokens": 9000}'
expect_status "unknown endpoint" 404 not_found /v1/embeddings '{}'
code=$(curl -s --max-time 10 -o "$TMP/err.json" -w '%{http_code}' "$U/v1/completions")
[ "$code" = 405 ] && ok || bad "GET /v1/completions: $code"
# bodies over the limit (8 MiB): with a Content-Length, and chunked
head -c 20000000 /dev/zero | tr '\0' ' ' >"$TMP/big.json"
code=$(curl -s --max-time 60 -o "$TMP/err.json" -w '%{http_code}' "$U/v1/completions" --data-binary @"$TMP/big.json")
[ "$code" = 413 ] && grep -q request_too_large "$TMP/err.json" && ok || bad "big body: $code $(cat "$TMP/err.json")"
code=$(curl -s --max-time 60 -o "$TMP/err.json" -w '%{http_code}' -H 'Transfer-Encoding: chunked' "$U/v1/completions" --data-binary @"$TMP/big.json")
[ "$code" = 413 ] && ok || bad "big chunked body: $code"
rm -f "$TMP/big.json"
# still serving, with the same answers
exp=$(gen "$P2" 30 $A2)
code=$(post /v1/completions "$(body "$P2" 30 "$M2")" "$TMP/r.json")
[ "$code" = 200 ] && [ "$(jq -r '.choices[0].text' "$TMP/r.json")" = "$exp" ] && ok || bad "serving after bad requests: $code"
[ "$(metric 'specdec_http_errors_total{code="400"}')" -ge 20 ] 2>/dev/null && ok || bad "400s counted in /metrics"

# a client that disconnects mid-stream: its session is cancelled and its cache freed
curl -s -N --max-time 1 -o "$TMP/cut.txt" "$U/v1/completions" \
    -d '{"prompt": "Once upon a time", "max_tokens": 8000, "ignore_eos": true, "temperature": 0, "stream": true}'
i=0
while [ $i -lt 100 ]; do
    [ "$(metric specdec_requests_cancelled_total)" = 1 ] && [ "$(metric specdec_live_sessions)" = 0 ] &&
        [ "$(metric specdec_kv_cells_used)" = 0 ] && break
    sleep 0.1
    i=$((i + 1))
done
[ -s "$TMP/cut.txt" ] && [ $i -lt 100 ] && ok ||
    bad "disconnect mid-stream: cancelled $(metric specdec_requests_cancelled_total), live $(metric specdec_live_sessions), kv cells $(metric specdec_kv_cells_used)"

# a client that goes away while waiting for a JSON answer: cancelled too
curl -s --max-time 1 -o /dev/null "$U/v1/completions" \
    -d '{"prompt": "Once upon a time", "max_tokens": 8000, "ignore_eos": true, "temperature": 0}'
i=0
while [ $i -lt 100 ]; do
    [ "$(metric specdec_requests_cancelled_total)" = 2 ] && [ "$(metric specdec_live_sessions)" = 0 ] &&
        [ "$(metric specdec_kv_cells_used)" = 0 ] && break
    sleep 0.1
    i=$((i + 1))
done
[ $i -lt 100 ] && ok || bad "disconnect while waiting: cancelled $(metric specdec_requests_cancelled_total), live $(metric specdec_live_sessions)"

# a slow client (its body trickles in for ~5 s) holds only its own connection: another is answered meanwhile
body "$P3" 20 "$M1" | jq -c --arg pad "$(printf '%01000d' 0)" '.user = $pad' >"$TMP/slow.json"
curl -s --max-time 60 --limit-rate 200 -o "$TMP/slow.out" -w '%{http_code}' "$U/v1/completions" --data-binary @"$TMP/slow.json" >"$TMP/slow.code" &
SLOW=$!
sleep 0.3
code=$(post /v1/completions "$(body "$P1" 5 "$M1")" "$TMP/r.json")
still=0
kill -0 "$SLOW" 2>/dev/null && still=1
wait "$SLOW"
[ "$code" = 200 ] && [ $still = 1 ] && [ "$(cat "$TMP/slow.code")" = 200 ] &&
    [ "$(jq -r '.choices[0].text' "$TMP/slow.out")" = "$(gen "$P3" 20)" ] && ok ||
    bad "slow client: the other got $code (slow one still sending: $still), the slow one $(cat "$TMP/slow.code")"

# 1,000 connections opened and dropped (half of them mid-request), 50 streams dropped after 0.2 s: still serving,
# nothing left running
if command -v bash >/dev/null 2>&1; then
    bash -c 'for i in $(seq 500); do exec 3<>/dev/tcp/127.0.0.1/$1 && exec 3>&-
             exec 3<>/dev/tcp/127.0.0.1/$1 && printf "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99\r\n\r\n{\"prompt\"" >&3
             exec 3>&-; done' sh "$PORT" 2>/dev/null
    seq 50 | xargs -P 10 -I{} curl -s -N --max-time 0.2 -o /dev/null "$U/v1/completions" \
        -d '{"prompt": "Once upon a time", "max_tokens": 4000, "ignore_eos": true, "stream": true}'
    i=0
    while [ $i -lt 200 ]; do
        [ "$(metric specdec_live_sessions)" = 0 ] && [ "$(metric specdec_queue_length)" = 0 ] &&
            [ "$(metric specdec_kv_cells_used)" = 0 ] && break
        sleep 0.1
        i=$((i + 1))
    done
    exp=$(gen "$P4" 30 $A3)
    code=$(post /v1/completions "$(body "$P4" 30 "$M3")" "$TMP/r.json")
    [ $i -lt 200 ] && [ "$code" = 200 ] && [ "$(jq -r '.choices[0].text' "$TMP/r.json")" = "$exp" ] && ok ||
        bad "after 1,000 dropped connections: live $(metric specdec_live_sessions), queue $(metric specdec_queue_length), status $code"
fi

# /metrics: the families and acceptance per draft position by method
curl -s --max-time 10 "$U/metrics" >"$TMP/m.txt"
for fam in 'specdec_requests_total{method="ngram"}' 'specdec_prompt_tokens_total{method="none"}' \
           'specdec_generated_tokens_total{method="draft"}' 'specdec_accepted_tokens_total{method="draft"}' \
           'specdec_verification_passes_total{method="early-exit"}' \
           'specdec_draft_position_acceptance{method="draft",position="1"}' 'specdec_queue_length' \
           'specdec_live_sessions' 'specdec_kv_pages_used' 'specdec_kv_pages_capacity'; do
    grep -qF "$fam " "$TMP/m.txt" && ok || bad "/metrics has no $fam"
done
grep -q '^# TYPE specdec_requests_total counter' "$TMP/m.txt" && ok || bad "/metrics TYPE lines"

# SIGTERM while a request streams: it finishes, then the server exits 0 (under ASan too: no leak)
case "${SPECDEC_TEST_SCALE:-1}" in 1) NDRAIN=2000 ;; *) NDRAIN=300 ;; esac
curl -s -N --max-time 120 -o "$TMP/drain.txt" "$U/v1/completions" \
    -d "{\"prompt\": \"Once upon a time\", \"max_tokens\": $NDRAIN, \"ignore_eos\": true, \"temperature\": 0, \"stream\": true}" &
CURL=$!
i=0
while [ ! -s "$TMP/drain.txt" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
kill -TERM "$MAIN"
wait "$MAIN"
rc=$?
wait "$CURL"
[ $rc -eq 0 ] && [ "$(sse_last "$TMP/drain.txt")" = "[DONE]" ] && grep -q '"finish_reason":"length"' "$TMP/drain.txt" &&
    ok || bad "SIGTERM drain: exit $rc, stream ends $(tail -c 200 "$TMP/drain.txt")"

# ---------------------------------------------------------------- queue limit and per-request timeout
if start_server "$TMP/q.log" -m "$TGT" -t 1 -c $CTX --parallel 1 --queue-limit 0 --timeout 3; then
    U=http://127.0.0.1:$PORT
    curl -s -N --max-time 30 -o "$TMP/long.txt" "$U/v1/completions" \
        -d '{"prompt": "Once upon a time", "max_tokens": 8000, "ignore_eos": true, "temperature": 0, "stream": true}' &
    CURL=$!
    i=0
    while [ ! -s "$TMP/long.txt" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    code=$(curl -s --max-time 10 -D "$TMP/hdr.txt" -o "$TMP/err.json" -w '%{http_code}' "$U/v1/completions" -d '{"prompt": "x", "max_tokens": 2}')
    [ "$code" = 503 ] && grep -qi '^Retry-After:' "$TMP/hdr.txt" && grep -q queue_full "$TMP/err.json" && ok ||
        bad "queue full: $code $(cat "$TMP/err.json")"
    wait "$CURL"
    grep -q '"code":"timeout"' "$TMP/long.txt" && [ "$(sse_last "$TMP/long.txt")" = "[DONE]" ] && ok ||
        bad "timeout: $(tail -c 300 "$TMP/long.txt")"
    code=$(post /v1/completions '{"prompt": "Once upon a time", "max_tokens": 5, "temperature": 0}' "$TMP/r.json")
    [ "$code" = 200 ] && ok || bad "serving after a timeout: $code"
    kill -TERM "$SPID"
    wait "$SPID"
else
    bad "queue server start: $(cat "$TMP/q.log")"
fi

# ---------------------------------------------------------------- API key, idle timeout
if start_server "$TMP/k.log" -m "$TGT" -t 1 -c 4096 --api-key s3cret --idle-timeout 1 --spec ngram --gamma 3 --temp 0; then
    U=http://127.0.0.1:$PORT
    # the server's flags are the defaults of a request: its method and temperature
    exp=$(gen "$P1" 30 --spec ngram --gamma 3)
    code=$(curl -s --max-time 60 -o "$TMP/r.json" -w '%{http_code}' -H 'Authorization: Bearer s3cret' "$U/v1/completions" \
        -d "{\"prompt\": \"$P1\", \"max_tokens\": 30}")
    [ "$code" = 200 ] && [ "$(jq -r '.choices[0].text' "$TMP/r.json")" = "$exp" ] && [ "$(jq -r .usage.method "$TMP/r.json")" = ngram ] &&
        ok || bad "server default method: $code $(cat "$TMP/r.json")"
    # a client that stalls in its body is closed after the idle timeout; an answer that takes longer is not cut
    code=$( (sleep 4; echo) | curl -s --max-time 10 -o /dev/null -w '%{http_code} %{time_total}' -H 'Authorization: Bearer s3cret' \
        -H 'Content-Length: 100' "$U/v1/completions" --data-binary @-)
    secs=${code#* }
    [ "${code% *}" = 000 ] && [ "${secs%%.*}" -le 3 ] && ok || bad "stalled client: status and time $code"
    code=$(curl -s --max-time 120 -o "$TMP/r.json" -w '%{http_code} %{time_total}' -H 'Authorization: Bearer s3cret' "$U/v1/completions" \
        -d '{"prompt": "Once upon a time", "max_tokens": 2500, "ignore_eos": true}')
    [ "${code% *}" = 200 ] && [ "$(jq -r .usage.completion_tokens "$TMP/r.json")" = 2500 ] && ok ||
        bad "a long answer with --idle-timeout 1: $code"
    echo "   (2500 tokens in ${code#* } s with --idle-timeout 1)"
    [ "$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "$U/health")" = 200 ] && ok || bad "/health needs no key"
    [ "$(curl -s --max-time 10 -o "$TMP/err.json" -w '%{http_code}' "$U/v1/models")" = 401 ] && grep -q invalid_api_key "$TMP/err.json" &&
        ok || bad "no key: not 401"
    [ "$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer wrong' "$U/metrics")" = 401 ] && ok || bad "wrong key: not 401"
    [ "$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer s3cret' "$U/v1/completions" -d '{"prompt": "Once", "max_tokens": 3}')" = 200 ] &&
        ok || bad "right key: not 200"
    kill -TERM "$SPID"
    wait "$SPID"
else
    bad "api-key server start: $(cat "$TMP/k.log")"
fi

# ---------------------------------------------------------------- chat templates and command-line errors
if start_server "$TMP/n.log" -m "$TGT" -t 1 -c 256; then
    U=http://127.0.0.1:$PORT
    expect_status "chat without a template" 400 "--chat-template" /v1/chat/completions '{"messages": [{"role": "user", "content": "hi"}]}'
    kill -TERM "$SPID"
    wait "$SPID"
fi
# a GGUF whose template is phi-3's is recognised
if $CLI gen-model --shape test-tiny --type f32 --vocab "$SHARED/models/vocab/ggml-vocab-phi-3.gguf" -o "$TMP/phi3.gguf" >/dev/null 2>&1; then
    TGT_SAVE=$TGT
    TGT=$TMP/phi3.gguf
    if start_server "$TMP/p.log" -m "$TGT" -t 1 -c 64; then
        grep -q "chat format phi3" "$TMP/p.log" && ok || bad "phi-3 template not recognised: $(cat "$TMP/p.log")"
        kill -TERM "$SPID"
        wait "$SPID"
    else
        bad "phi-3 model server: $(cat "$TMP/p.log")"
    fi
    TGT=$TGT_SAVE
fi
# while the model loads, /health and requests get 503 (the model is a FIFO: loading waits until it is opened for
# writing; then it is refused as not a regular file and the server exits non-zero)
if mkfifo "$TMP/slow.gguf" 2>/dev/null; then
    $CLI serve -m "$TMP/slow.gguf" --port 0 -t 1 >/dev/null 2>"$TMP/l.log" &
    LPID=$!
    PIDS="$PIDS $LPID"
    PORT=""
    i=0
    while [ $i -lt 100 ] && [ -z "$PORT" ]; do
        PORT=$(sed -n 's/.*listening on http:\/\/[0-9.]*:\([0-9][0-9]*\).*/\1/p' "$TMP/l.log")
        [ -n "$PORT" ] || sleep 0.1
        i=$((i + 1))
    done
    h=$(curl -s --max-time 10 -w ' %{http_code}' "http://127.0.0.1:$PORT/health")
    [ "$h" = '{"status":"loading"} 503' ] && ok || bad "/health while loading: $h"
    code=$(curl -s --max-time 10 -o "$TMP/err.json" -w '%{http_code}' "http://127.0.0.1:$PORT/v1/completions" -d '{"prompt": "x"}')
    [ "$code" = 503 ] && grep -q '"code":"loading"' "$TMP/err.json" && ok || bad "request while loading: $code $(cat "$TMP/err.json")"
    : >"$TMP/slow.gguf"
    wait "$LPID"
    rc=$?
    [ $rc -ne 0 ] && grep -q "error:.*slow.gguf" "$TMP/l.log" && ok || bad "a model that fails to load: exit $rc, $(cat "$TMP/l.log")"
fi
echo "{% for m in messages %}{{ m.content }}{% endfor %}" >"$TMP/odd.jinja"
$CLI serve -m "$TGT" --chat-template "$TMP/odd.jinja" --port 0 >/dev/null 2>"$TMP/e.txt"
[ $? -ne 0 ] && grep -q "none of the known families" "$TMP/e.txt" && ok || bad "unknown template file: $(cat "$TMP/e.txt")"
$CLI serve -m "$TGT" --chat-template nosuch --port 0 >/dev/null 2>"$TMP/e.txt"
[ $? -ne 0 ] && grep -q "chatml, llama2" "$TMP/e.txt" && ok || bad "unknown template name: $(cat "$TMP/e.txt")"
$CLI serve -m /no/such/model.gguf --port 0 >/dev/null 2>"$TMP/e.txt"
[ $? -ne 0 ] && grep -q "/no/such/model.gguf" "$TMP/e.txt" && ok || bad "missing model: $(cat "$TMP/e.txt")"
$CLI serve --port 0 >/dev/null 2>"$TMP/e.txt"
[ $? -ne 0 ] && grep -q "needs -m" "$TMP/e.txt" && ok || bad "no model: $(cat "$TMP/e.txt")"
$CLI serve -m "$TGT" --port 70000 >/dev/null 2>"$TMP/e.txt"
[ $? -ne 0 ] && grep -q -- "--port" "$TMP/e.txt" && ok || bad "bad port: $(cat "$TMP/e.txt")"
$CLI serve --help | grep -q "/v1/chat/completions" && ok || bad "serve --help"

# Speculative Verification: a request's verify=sv needs the server's profile and companion
$CLI profile sv -m "$TGT" --draft-model "$DRAFT" --companion "$SHARED/models/stories-plain.gguf" -t 1 -n 24 --limit 3 \
    --prompts "$SHARED/data/stories_dev.jsonl" --out "$TMP/sv.json" >/dev/null 2>&1 || bad "profile sv for the server"
if start_server "$TMP/sv.log" -m "$TGT" -t 1 -c $CTX --parallel 2 --draft-model "$DRAFT" --companion "$SHARED/models/stories-plain.gguf" \
    --sv-profile "$TMP/sv.json"; then
    U=http://127.0.0.1:$PORT
    spec='{"method":"draft","gamma":5,"verify":"sv"}'
    exp=$(gen "$P2" 40 --spec draft --draft-model "$DRAFT" --gamma 5)
    code=$(post /v1/completions "$(body "$P2" 40 "$spec")" "$TMP/r.json")
    got=$(jq -r '.choices[0].text' "$TMP/r.json")
    if [ "$code" = 200 ] && [ "$got" = "$exp" ]; then ok; else bad "sv greedy: status $code, expected [$exp] got [$got]"; fi
    kill -TERM "$SPID" 2>/dev/null
else
    bad "sv server start: $(cat "$TMP/sv.log")"
fi

# SpecDec++: --accept-head given twice (a head for the draft model, one for SWIFT's skip set); a request with
# ctrl=specdecpp takes the head made for its drafter and answers plain greedy decoding's text
CORPUS=$SHARED/data/stories_corpus.txt
$CLI train accept-head -m "$TGT" --draft-model "$DRAFT" --corpus "$CORPUS" --tokens 300 --epochs 1 --temp 0 -t 1 \
    --out "$TMP/hd.gguf" >/dev/null 2>&1 || bad "train accept-head (draft) for the server"
$CLI train accept-head -m "$TGT" --swift --corpus "$CORPUS" --tokens 300 --epochs 1 --temp 0 -t 1 \
    --out "$TMP/hs.gguf" >/dev/null 2>&1 || bad "train accept-head (swift) for the server"
if start_server "$TMP/sdpp.log" -m "$TGT" -t 1 -c $CTX --parallel 2 --draft-model "$DRAFT" \
    --accept-head "$TMP/hd.gguf" --accept-head "$TMP/hs.gguf"; then
    U=http://127.0.0.1:$PORT
    exp=$(gen "$P2" 40)
    for spec in '{"method":"draft","ctrl":"specdecpp","gamma_max":20,"stop_threshold":0.5}' \
                '{"method":"swift","ctrl":"specdecpp","stop_threshold":0.7}'; do
        code=$(post /v1/completions "$(body "$P2" 40 "$spec")" "$TMP/r.json")
        got=$(jq -r '.choices[0].text' "$TMP/r.json")
        if [ "$code" = 200 ] && [ "$got" = "$exp" ] && [ "$(jq -r '.usage.draft_tokens > 0' "$TMP/r.json")" = true ]; then ok
        else bad "specdecpp $spec: status $code, expected [$exp] got [$got] $(cat "$TMP/r.json")"; fi
    done
    expect_status "specdecpp for early exit without its head" 400 "acceptance head" /v1/completions \
        '{"prompt": "x", "speculative": {"method": "early-exit", "ctrl": "specdecpp"}}'
    kill -TERM "$SPID" 2>/dev/null
else
    bad "specdecpp server start: $(cat "$TMP/sdpp.log")"
fi

finish
