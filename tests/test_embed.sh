#!/bin/sh
# gen-model --embed: a widened stories-ee writes the same greedy stories as stories-ee; bad shapes are refused.
TEST=test_embed
. "$(dirname "$0")/lib.sh"
SMALL="$SHARED/models/stories-ee.gguf"
tdir=$TMP

greedy() { # greedy MODEL PROMPT -> the continuation on stdout
    $CLI generate -m "$1" -p "$2" -n 80 --temp 0 -t 1 2>"$err"
}
# F32 at several widths (head counts 9, 12, 24 over 3, 4, 8 KV heads), and one with an explicit wider FFN and
# context: the same function, so the same greedy text on the story prompts
for shape in "--dim 288" "--dim 384 --ffn 768" "--dim 768 --heads 24 --kv-heads 8 --ffn 512 --ctx 256"; do
    w="$tdir/wide.gguf"
    if ! $CLI gen-model --embed "$SMALL" $shape --type f32 -o "$w" >/dev/null 2>"$err"; then
        bad "embed $shape: $(cat "$err")"
        continue
    fi
    for p in "Once upon a time" "A snowman stood in the yard" "Tim had a new toy car" "Lily's mom made soup"; do
        a=$(greedy "$SMALL" "$p")
        b=$(greedy "$w" "$p")
        if [ -n "$a" ] && [ "$a" = "$b" ]; then ok; else bad "embed $shape, '$p': '$a' vs '$b'"; fi
    done
done
# the header says what was asked for
$CLI gen-model --embed "$SMALL" --dim 384 --type f32 -o "$tdir/w.gguf" >/dev/null 2>&1
$CLI generate -m "$tdir/w.gguf" -p hi -n 1 --temp 0 -t 1 2>"$err" >/dev/null
grep -q "dim 384" "$err" && ok || bad "widened model's dim: $(cat "$err")"
# quantised wide models load and generate (their weights are rounded: no equality asked)
$CLI gen-model --embed "$SMALL" --dim 384 --type q8_0 -o "$tdir/q.gguf" >/dev/null 2>"$err" &&
    $CLI generate -m "$tdir/q.gguf" -p "Once upon a time" -n 20 --temp 0 -t 1 >/dev/null 2>"$err" && ok ||
    bad "embed q8_0: $(cat "$err")"

# K-quants: dim 768 (whole 256-blocks) as q4_k and as llama.cpp's q4_k_m mix; dim 384 falls back per matrix (as
# gen-model does)
for tshape in "q4_k --dim 768 --ffn 512" "q4_k_m --dim 768 --ffn 512" "q4_k --dim 384"; do
    set -- $tshape
    type=$1
    shift
    $CLI gen-model --embed "$SMALL" "$@" --type $type -o "$tdir/k.gguf" >/dev/null 2>"$err" &&
        $CLI generate -m "$tdir/k.gguf" -p "Once upon a time" -n 20 --temp 0 -t 1 >/dev/null 2>"$err" && ok ||
        bad "embed $tshape: $(cat "$err")"
done
# bad arguments: a non-zero exit and a message naming the problem; nothing written
expect_err() { # expect_err "what" "pattern" args...
    what=$1; pat=$2; shift 2
    $CLI "$@" >/dev/null 2>"$err"
    rc=$?
    if [ $rc -ne 0 ] && grep -q -- "$pat" "$err" && [ ! -e "$tdir/bad.gguf" ]; then ok; else bad "$what (rc $rc): $(cat "$err")"; fi
}
expect_err "dim not larger" "larger than the small model's dim 192" gen-model --embed "$SMALL" --dim 192 --type f32 -o "$tdir/bad.gguf"
expect_err "dim not a multiple of the head size" "multiple of the head size 32" gen-model --embed "$SMALL" --dim 400 --type f32 -o "$tdir/bad.gguf"
expect_err "head size not kept" "head size 32 is kept" gen-model --embed "$SMALL" --dim 384 --heads 8 --type f32 -o "$tdir/bad.gguf"
expect_err "ratio broken" "3 query heads per KV head" gen-model --embed "$SMALL" --dim 384 --kv-heads 6 --type f32 -o "$tdir/bad.gguf"
expect_err "head count not a multiple of the group" "3 query heads per KV head" gen-model --embed "$SMALL" --dim 256 --type f32 -o "$tdir/bad.gguf"
expect_err "ffn smaller" "smaller than the small model's 512" gen-model --embed "$SMALL" --dim 384 --ffn 256 --type f32 -o "$tdir/bad.gguf"
expect_err "not a GGUF small model" "needs a GGUF model" gen-model --embed "$SHARED/models/stories260K.bin" --dim 128 --type f32 -o "$tdir/bad.gguf"
expect_err "missing small model" "/no/such.gguf" gen-model --embed /no/such.gguf --dim 384 --type f32 -o "$tdir/bad.gguf"
expect_err "embed with --shape" "drop --shape" gen-model --embed "$SMALL" --shape test-tiny --dim 384 --type f32 -o "$tdir/bad.gguf"
expect_err "embed without --dim" "needs --dim" gen-model --embed "$SMALL" --type f32 -o "$tdir/bad.gguf"
expect_err "--dim without --embed" "go with --embed" gen-model --shape test-tiny --dim 384 --type f32 --vocab "$SHARED/models/vocab/ggml-vocab-llama-spm.gguf" -o "$tdir/bad.gguf"
expect_err "unknown type" "unknown weight type" gen-model --embed "$SMALL" --dim 384 --type q9 -o "$tdir/bad.gguf"

finish
