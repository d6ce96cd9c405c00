# tests/lib.sh: what the shell tests share. A test sets TEST (its name) and sources this file first:
#     TEST=test_x
#     . "$(dirname "$0")/lib.sh"
# It then has:
#   BUILD, SHARED, CLI   the build folder, the shared models/data folder, the CLI (from the environment or defaults)
#   ok / bad MSG         count a passed / failed check (bad prints "FAIL: MSG")
#   finish               prints "TEST: P passed, F failed" and exits 0 only when nothing failed
#   skip WHY             prints why the test is skipped and a "0 passed, 0 failed" line, and exits 0
#   TMP                  a temporary folder, removed on exit (KEEP_TMP=1 keeps it) after the processes in $PIDS
#                        are killed; out and err are files in it
#   watchdog S           ends the whole test with a FAIL line after S seconds
#   start_server LOG ARGS...   `specdec serve --port 0 ARGS...` (stderr to LOG): sets SPID (added to PIDS) and
#                        PORT once it is ready; returns 1 when it exits or is not ready within 30 s
BUILD=${BUILD:-build}
SHARED=${SHARED:-../shared}
CLI=$BUILD/specdec
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; }
finish() {
    echo "$TEST: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit $?
}
skip() {
    echo "$TEST: skipped: $1"
    echo "$TEST: 0 passed, 0 failed"
    exit 0
}

TMP=$(mktemp -d)
out=$TMP/out
err=$TMP/err
PIDS=""
test_cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null; done
    if [ -n "$KEEP_TMP" ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
}
trap test_cleanup EXIT
trap 'exit 1' INT TERM

watchdog() {
    wd_top=$$
    (
        sleep "$1" &
        s=$!
        trap 'kill $s 2>/dev/null; exit 0' TERM
        wait $s
        echo "FAIL: $TEST timed out after $1 s"
        kill -TERM $wd_top
    ) 2>/dev/null &
    PIDS="$PIDS $!"
}

start_server() {
    ss_log=$1
    shift
    $CLI serve --port 0 "$@" >/dev/null 2>"$ss_log" &
    SPID=$!
    PIDS="$PIDS $SPID"
    PORT=""
    ss_i=0
    while [ $ss_i -lt 300 ]; do
        PORT=$(sed -n 's/.*ready on http:\/\/[0-9.]*:\([0-9][0-9]*\).*/\1/p' "$ss_log")
        [ -n "$PORT" ] && return 0
        kill -0 "$SPID" 2>/dev/null || return 1
        sleep 0.1
        ss_i=$((ss_i + 1))
    done
    return 1
}
