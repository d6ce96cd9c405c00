#!/bin/sh
# The whole suite: the tests (optimised build), the tests again under AddressSanitizer + UBSan, a 30-second load
# test of the server, and a short run of the fuzzers. Ends with one "N passed, N failed" line over everything.
SHARED=${SHARED:-../shared}
export SHARED
# builds in parallel (the tests themselves run one after another)
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
log=$(mktemp)
total_p=0
total_f=0
step() { # step NAME command...
    name=$1; shift
    echo "#### $name"
    "$@" 2>&1 | tee "$log"
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/'); [ -n "$p" ] || p=0
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/'); [ -n "$f" ] || f=0
    total_p=$((total_p + p)); total_f=$((total_f + f))
}
step "tests" make -s -j"$JOBS" test
step "tests under ASan + UBSan" make -s -j"$JOBS" asan
whole() { # whole NAME SUMMARY-PATTERN FAILURE command...: a check that passes or fails as one (quiet unless it fails)
    name=$1; pat=$2; why=$3; shift 3
    echo "#### $name"
    if "$@" >"$log" 2>&1; then
        grep -E "$pat" "$log"
        total_p=$((total_p + 1))
    else
        tail -n 40 "$log"
        echo "FAIL: $why"
        total_f=$((total_f + 1))
    fi
}
whole "load test: 64 clients against specdec serve for 30 s (make loadtest-short)" '^(requests|time to first|server RSS)' \
    "the load test" make -s loadtest-short
whole "fuzz the GGUF reader, a model load + forward pass and the JSONL reader (${FUZZ_SECONDS:-60} s in all)" \
    '^Done [0-9]+ runs' "the fuzzer found a crash (see above)" make -s -j"$JOBS" fuzz FUZZ_SECONDS=${FUZZ_SECONDS:-60}
rm -f "$log"
echo "$total_p passed, $total_f failed"
[ "$total_f" -eq 0 ]
