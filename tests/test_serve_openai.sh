#!/bin/sh
# The official `openai` npm client (v4, CommonJS; found in node's global modules or NODE_PATH) against
# `specdec serve` with an API key: completion, chat, both streamed, the speculative object, an error, the model
# list — each answer equal to `specdec generate --temp 0`. Skipped with a message when Node or the package is
# missing (npm install -g openai@4).
TEST=test_serve_openai
. "$(dirname "$0")/lib.sh"
TGT=$SHARED/models/stories-ee.gguf
command -v node >/dev/null 2>&1 || skip "node is not installed (apt-get install nodejs)"
command -v jq >/dev/null 2>&1 || skip "jq is not installed"
NODE_PATH=${NODE_PATH:-$(npm root -g 2>/dev/null)}
export NODE_PATH
node -e "require('openai')" >/dev/null 2>&1 || skip "the openai npm package is not installed (npm install -g openai@4)"

start_server "$TMP/server.log" -m "$TGT" -t 1 -c 512 --chat-template chatml --api-key k3y
if [ -z "$PORT" ]; then
    bad "server start: $(cat "$TMP/server.log")"
else
    prompt="Once upon a time"
    user="Tell me a story."
    nl='
'
    chat_prompt="<|im_start|>user${nl}${user}<|im_end|>${nl}<|im_start|>assistant${nl}"
    gen() { g=$($CLI generate -m "$TGT" -c 512 -t 1 -p "$1" -n 40 --temp 0 $2 2>/dev/null); printf '%s' "${g#"$1"}"; }
    exp=$(gen "$prompt")
    exp_chat=$(gen "$chat_prompt")
    exp_ngram=$(gen "$prompt" "--spec ngram --gamma 4")
    timeout 120 node tests/serve_openai_client.js "http://127.0.0.1:$PORT/v1" k3y "$prompt" "$user" >"$TMP/out.json" 2>"$TMP/err.txt"
    rc=$?
    [ $rc -eq 0 ] && ok || bad "client exit $rc: $(cat "$TMP/err.txt")"
    field() { jq -r ".$1" "$TMP/out.json" 2>/dev/null; }
    [ "$(field completion)" = "$exp" ] && ok || bad "completion: [$(field completion)] vs [$exp]"
    [ "$(field completion_stream)" = "$exp" ] && ok || bad "streamed completion: [$(field completion_stream)]"
    [ "$(field chat)" = "$exp_chat" ] && ok || bad "chat: [$(field chat)] vs [$exp_chat]"
    [ "$(field chat_stream)" = "$exp_chat" ] && [ "$(field chat_stream_tokens)" -gt 0 ] 2>/dev/null && ok || bad "streamed chat: [$(field chat_stream)]"
    [ "$(field spec)" = "$exp_ngram" ] && [ "$(field spec_method)" = ngram ] && ok || bad "speculative: [$(field spec)] $(field spec_method)"
    [ "$(field error_status)" = 400 ] && [ "$(field error_param)" = max_tokens ] && ok || bad "error: $(field error_status) $(field error_param)"
    [ "$(field model_id)" = stories-ee.gguf ] && ok || bad "models: $(field model_id)"
    # the client without the key is refused
    timeout 60 node tests/serve_openai_client.js "http://127.0.0.1:$PORT/v1" wrong "$prompt" "$user" >/dev/null 2>"$TMP/err.txt"
    [ $? -ne 0 ] && grep -q "401" "$TMP/err.txt" && ok || bad "wrong key: $(cat "$TMP/err.txt")"
fi
finish
