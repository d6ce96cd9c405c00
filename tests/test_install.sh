#!/bin/sh
# make install / make uninstall into a temporary prefix: the files, the soname links, specdec.pc; examples/simple.c
# built with nothing but `pkg-config --cflags --libs specdec` (shared) and `pkg-config --static` (static) gives the
# story; DESTDIR; uninstall removes exactly what install wrote.
TEST=test_install
. "$(dirname "$0")/lib.sh"
CC=${CC:-cc}
if ldd "$BUILD/libspecdec.so" 2>/dev/null | grep -q 'libasan\|libubsan'; then
    # a sanitizer build's library cannot be linked or loaded without the sanitizer runtime
    skip "a sanitizer build's library needs the sanitizer runtime"
fi
tmp=$TMP
version=$(sed -n 's/^#define SPECDEC_VERSION "\(.*\)"/\1/p' include/specdec.h)
major=${version%%.*}
model=$SHARED/models/stories260K.gguf
p=$tmp/prefix

make --no-print-directory -s install BUILD="$BUILD" PREFIX="$p" LDCONFIG=true >"$out" 2>"$err" && ok || bad "make install: $(cat "$err")"
for f in bin/specdec lib/libspecdec.a "lib/libspecdec.so.$version" include/specdec.h lib/pkgconfig/specdec.pc; do
    [ -f "$p/$f" ] && ok || bad "not installed: $f"
done
[ "$(readlink "$p/lib/libspecdec.so.$major")" = "libspecdec.so.$version" ] && ok || bad "link libspecdec.so.$major"
[ "$(readlink "$p/lib/libspecdec.so")" = "libspecdec.so.$major" ] && ok || bad "link libspecdec.so"
readelf -d "$p/lib/libspecdec.so.$version" | grep -q "soname: \[libspecdec.so.$major\]" && ok || bad "soname"
# only the public names are exported
nm -D --defined-only "$p/lib/libspecdec.so.$version" | awk '$2 == "T" && $3 !~ /^sd_/' | grep -q . && bad "non-sd_ exports" || ok
[ "$("$p/bin/specdec" --version)" = "specdec $version" ] && ok || bad "installed specdec --version"

export PKG_CONFIG_PATH="$p/lib/pkgconfig"
[ "$(pkg-config --modversion specdec)" = "$version" ] && ok || bad "pkg-config --modversion"
pkg-config --static --libs specdec | grep -q -- "-lutf8proc" && ok || bad "static libs lack utf8proc: $(pkg-config --static --libs specdec)"
expect=$("$BUILD/example_simple" "$model" "Once upon a time" 24)
# shared: found through LD_LIBRARY_PATH (no rpath), and it is the installed copy that is loaded
if $CC examples/simple.c $(pkg-config --cflags --libs specdec) -o "$tmp/simple" 2>"$err"; then
    ok
    LD_LIBRARY_PATH="$p/lib" ldd "$tmp/simple" | grep -q "libspecdec.so.$major => $p/lib/libspecdec.so.$major" && ok \
        || bad "shared example does not load the installed library: $(LD_LIBRARY_PATH="$p/lib" ldd "$tmp/simple")"
    got=$(LD_LIBRARY_PATH="$p/lib" "$tmp/simple" "$model" "Once upon a time" 24)
    [ -n "$got" ] && [ "$got" = "$expect" ] && echo "$got" | grep -q "named Lily" && ok || bad "shared example output: $got"
else
    bad "build against the installed shared library: $(cat "$err")"
fi
# static: the whole program static, from pkg-config --static alone
if $CC -static examples/simple.c $(pkg-config --static --cflags --libs specdec) -o "$tmp/simple_static" 2>"$err"; then
    ok
    got=$("$tmp/simple_static" "$model" "Once upon a time" 24)
    [ "$got" = "$expect" ] && ok || bad "static example output: $got"
else
    bad "static build against the installed library: $(cat "$err")"
fi

# the Python binding on the installed library (SPECDEC_LIB as the file and as the folder)
if command -v python3 >/dev/null 2>&1; then
    for lib in "$p/lib/libspecdec.so.$major" "$p/lib"; do
        got=$(SPECDEC_LIB=$lib PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1 python3 -c "
import sys, specdec
with specdec.Model(sys.argv[1], n_threads=1) as m:
    print(specdec.library_path()); print(sys.argv[2] + m.generate(sys.argv[2], max_tokens=24, temperature=0).text)
" "$model" "Once upon a time" 2>&1)
        [ "$got" = "$(printf '%s\n%s' "$p/lib/libspecdec.so.$major" "$expect")" ] && ok || bad "python on the installed library ($lib): $got"
    done
fi

# uninstall removes what install wrote, and nothing else
mkdir -p "$p/lib" && echo keep >"$p/lib/not-ours.txt"
make --no-print-directory -s uninstall BUILD="$BUILD" PREFIX="$p" LDCONFIG=true >"$out" 2>"$err" && ok || bad "make uninstall: $(cat "$err")"
left=$(cd "$p" && find . ! -type d | sort | tr '\n' ' ')
[ "$left" = "./lib/not-ours.txt " ] && ok || bad "after uninstall: $left"

# DESTDIR: files staged under it, paths in specdec.pc without it
d=$tmp/stage
make --no-print-directory -s install BUILD="$BUILD" PREFIX=/opt/specdec DESTDIR="$d" LDCONFIG=true >"$out" 2>"$err" && ok \
    || bad "install DESTDIR: $(cat "$err")"
[ -f "$d/opt/specdec/lib/libspecdec.so.$version" ] && grep -qx "prefix=/opt/specdec" "$d/opt/specdec/lib/pkgconfig/specdec.pc" \
    && grep -qx "libdir=/opt/specdec/lib" "$d/opt/specdec/lib/pkgconfig/specdec.pc" && ok || bad "DESTDIR layout"
make --no-print-directory -s uninstall BUILD="$BUILD" PREFIX=/opt/specdec DESTDIR="$d" LDCONFIG=true >"$out" 2>"$err"
[ -z "$(find "$d" ! -type d)" ] && ok || bad "DESTDIR uninstall left: $(find "$d" ! -type d)"

finish
