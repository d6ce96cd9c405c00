#!/bin/sh
# Runs every test binary and script; prints per-suite lines and a final "N passed, N failed".
BUILD=${BUILD:-build}
SHARED=${SHARED:-../shared}
export SHARED BUILD
total_pass=0
total_fail=0
suites_failed=""
for t in "$BUILD"/tests/test_* tests/test_*.sh; do
    [ -f "$t" ] || continue
    case "$t" in *.o|*.d) continue ;; esac
    echo "== $t"
    out=$(mktemp)
    start=$(date +%s)
    case "$t" in
        *.sh) sh "$t" >"$out" 2>&1 ;;
        *) "$t" >"$out" 2>&1 ;;
    esac
    rc=$?
    cat "$out"
    line=$(grep -E '^[A-Za-z0-9_.-]+: [0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
    rm -f "$out"
    p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
    [ -n "$p" ] || p=0
    [ -n "$f" ] || f=0
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "   (exit status $rc)"; fi
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
    [ "$f" -eq 0 ] || suites_failed="$suites_failed $t"
    echo "   ($(( $(date +%s) - start )) s)"
done
[ -z "$suites_failed" ] || echo "failing suites:$suites_failed"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
