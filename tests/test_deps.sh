#!/bin/sh
# The Debian package list and its checker (scripts/deps.sh), as `make demo` and .ci/run use them: a missing package
# gives the exact apt-get line (sudo when not root) and a stop; as root it is installed. Nothing is really installed:
# the list, the user id, dpkg-query and apt-get are replaced through the environment.
TEST=test_deps
. "$(dirname "$0")/lib.sh"
tmp=$TMP

# the real list holds what the build needs, and everything on it is installed here (the suite is running)
pk=$(sh scripts/deps.sh list)
for p in gcc make pkg-config libutf8proc-dev clang libclang-rt-dev python3; do
    case " $pk " in *" $p "*) ok ;; *) bad "package list lacks $p: $pk" ;; esac
done
sh scripts/deps.sh check >"$out" 2>"$err" && [ ! -s "$out" ] && [ ! -s "$err" ] && ok || bad "check on this machine: $(cat "$err")"

# a fake list: one real package, two that do not exist, comments and blank lines
printf '# comment\n\ngcc   # the compiler\nspecdec-fake-one\n  specdec-fake-two # why\n' >"$tmp/list"
SPECDEC_DEPS_LIST=$tmp/list sh scripts/deps.sh list >"$out"
[ "$(cat "$out")" = "gcc specdec-fake-one specdec-fake-two" ] && ok || bad "list parsing: $(cat "$out")"

# not root: the exact sudo line, exit 1, nothing run
SPECDEC_DEPS_LIST=$tmp/list SPECDEC_DEPS_UID=1000 SPECDEC_APT_GET="touch $tmp/apt-ran" sh scripts/deps.sh ensure >"$out" 2>"$err"
rc=$?
[ $rc -eq 1 ] && grep -qx "    sudo apt-get install -y specdec-fake-one specdec-fake-two" "$err" && [ ! -e "$tmp/apt-ran" ] && ok \
    || bad "not root: rc $rc, $(cat "$err")"
# check never installs, even as root
SPECDEC_DEPS_LIST=$tmp/list SPECDEC_DEPS_UID=0 SPECDEC_APT_GET="touch $tmp/apt-ran" sh scripts/deps.sh check >"$out" 2>"$err"
rc=$?
[ $rc -eq 1 ] && grep -qx "    apt-get install -y specdec-fake-one specdec-fake-two" "$err" && [ ! -e "$tmp/apt-ran" ] && ok \
    || bad "check as root: rc $rc, $(cat "$err")"

# root: apt-get update, then apt-get install -y of exactly the missing ones; a fake dpkg-query sees what the fake
# apt-get "installed"
cat >"$tmp/dpkg-query" <<'EOS'
#!/bin/sh
# fake dpkg-query -W -f=... PKG: installed when PKG is in $FAKE_STATE
for p; do :; done
grep -qx "$p" "$FAKE_STATE" 2>/dev/null && printf 'install ok installed' && exit 0
exit 1
EOS
cat >"$tmp/apt-get" <<'EOS'
#!/bin/sh
# fake apt-get: logs its arguments; `install` marks the packages installed in $FAKE_STATE
echo "$*" >>"$FAKE_LOG"
[ "$1" = install ] || exit 0
shift
for p; do case "$p" in -*) ;; *) echo "$p" >>"$FAKE_STATE" ;; esac; done
EOS
chmod +x "$tmp/dpkg-query" "$tmp/apt-get"
echo gcc >"$tmp/state"
FAKE_STATE=$tmp/state FAKE_LOG=$tmp/log SPECDEC_DEPS_LIST=$tmp/list SPECDEC_DEPS_UID=0 SPECDEC_APT_GET=$tmp/apt-get \
    SPECDEC_DPKG_QUERY=$tmp/dpkg-query sh scripts/deps.sh ensure >"$out" 2>"$err"
rc=$?
[ $rc -eq 0 ] && [ "$(cat "$tmp/log")" = "update -qq
install -y -qq specdec-fake-one specdec-fake-two" ] && ok || bad "root install: rc $rc, log $(cat "$tmp/log"), $(cat "$err")"
# ... and a second run finds nothing missing and runs nothing
: >"$tmp/log"
FAKE_STATE=$tmp/state FAKE_LOG=$tmp/log SPECDEC_DEPS_LIST=$tmp/list SPECDEC_DEPS_UID=0 SPECDEC_APT_GET=$tmp/apt-get \
    SPECDEC_DPKG_QUERY=$tmp/dpkg-query sh scripts/deps.sh ensure >"$out" 2>"$err" && [ ! -s "$tmp/log" ] && ok \
    || bad "second run: $(cat "$tmp/log" "$err")"
# an apt-get that installs nothing: still missing is an error
echo gcc >"$tmp/state"
FAKE_STATE=$tmp/state FAKE_LOG=$tmp/log SPECDEC_DEPS_LIST=$tmp/list SPECDEC_DEPS_UID=0 SPECDEC_APT_GET=true \
    SPECDEC_DPKG_QUERY=$tmp/dpkg-query sh scripts/deps.sh ensure >"$out" 2>"$err"
[ $? -eq 1 ] && grep -q "still missing.*specdec-fake-one specdec-fake-two" "$err" && ok || bad "apt-get without effect: $(cat "$err")"
# a list that cannot be read
SPECDEC_DEPS_LIST=$tmp/none sh scripts/deps.sh check >"$out" 2>"$err"
[ $? -eq 2 ] && grep -q "cannot read the package list" "$err" && ok || bad "missing list: $(cat "$err")"

# make demo and .ci/run go through the same list: with a package missing and no root they stop with the apt-get line
# before building anything
SPECDEC_DEPS_LIST=$tmp/list SPECDEC_DEPS_UID=1000 make --no-print-directory demo BUILD="$tmp/build" >"$out" 2>"$err"
rc=$?
[ $rc -ne 0 ] && grep -qx "    sudo apt-get install -y specdec-fake-one specdec-fake-two" "$err" && [ ! -e "$tmp/build" ] && ok \
    || bad "make demo with a missing package: rc $rc, $(cat "$err")"
SPECDEC_DEPS_LIST=$tmp/list SPECDEC_DEPS_UID=1000 timeout 60 bash .ci/run >"$out" 2>"$err"
rc=$?
[ $rc -eq 1 ] && grep -qx "    sudo apt-get install -y specdec-fake-one specdec-fake-two" "$err" && ok || bad ".ci/run: rc $rc, $(cat "$err")"

finish
