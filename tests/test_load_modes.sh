#!/bin/sh
# --no-mmap and --mlock: the same tokens as a mapped model; a lock the limit refuses is an error naming the limit.
TEST=test_load_modes
. "$(dirname "$0")/lib.sh"
M="$SHARED/models/stories-ee.gguf"
tdir=$TMP

$CLI generate -m "$M" -p "Once upon a time" -n 60 --temp 0 -t 1 >"$tdir/ref" 2>"$tdir/err" || bad "mapped: $(cat "$tdir/err")"
for f in --no-mmap --mlock "--no-mmap --mlock"; do
    $CLI generate -m "$M" -p "Once upon a time" -n 60 --temp 0 -t 1 $f >"$tdir/out" 2>"$tdir/err" &&
        [ -s "$tdir/out" ] && cmp -s "$tdir/ref" "$tdir/out" && ok || bad "generate $f: $(cat "$tdir/err")"
done
# the draft model is read the same way
$CLI generate -m "$M" -p "Once upon a time" -n 40 --temp 0 -t 1 --no-mmap --spec draft \
    --draft-model "$SHARED/models/stories260K.gguf" --compare >/dev/null 2>"$tdir/err" && ok || bad "draft --no-mmap: $(cat "$tdir/err")"
$CLI bench decode -m "$M" --no-mmap -n 4 --reps 1 --bw-mib 16 -t 1 >"$tdir/out" 2>"$tdir/err" && grep -q roofline "$tdir/out" &&
    ok || bad "bench decode --no-mmap: $(cat "$tdir/err")"
$CLI generate --help | grep -q -- "--no-mmap" && $CLI generate --help | grep -q -- "--mlock" && ok || bad "generate --help"
# a limit that refuses the lock: without CAP_IPC_LOCK and with a 64 KiB RLIMIT_MEMLOCK (AddressSanitizer builds
# intercept mlock and ignore it, so there the lock cannot be refused)
if ldd "$CLI" 2>/dev/null | grep -q libasan; then
    echo "skip: refused --mlock (AddressSanitizer ignores mlock)"
elif command -v setpriv >/dev/null && [ "$(id -u)" -eq 0 ]; then
    setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock sh -c "ulimit -l 64 && exec $CLI generate -m '$M' -p x -n 2 --mlock" \
        >/dev/null 2>"$tdir/err"
    rc=$?
    [ $rc -ne 0 ] && grep -q "RLIMIT_MEMLOCK" "$tdir/err" && ok || bad "refused --mlock (rc $rc): $(cat "$tdir/err")"
elif [ "$(id -u)" -ne 0 ]; then
    (ulimit -l 64 2>/dev/null && $CLI generate -m "$M" -p x -n 2 --mlock >/dev/null 2>"$tdir/err")
    rc=$?
    [ $rc -ne 0 ] && grep -q "RLIMIT_MEMLOCK" "$tdir/err" && ok || bad "refused --mlock (rc $rc): $(cat "$tdir/err")"
else
    echo "skip: refused --mlock (no setpriv to drop CAP_IPC_LOCK)"
fi
finish
