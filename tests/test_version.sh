#!/bin/sh
# specdec --version / version (the header's SPECDEC_VERSION, through the library's sd_version), and
# generate --help listing every speculative method of the registry.
TEST=test_version
. "$(dirname "$0")/lib.sh"
version=$(sed -n 's/^#define SPECDEC_VERSION "\(.*\)"/\1/p' include/specdec.h)
maj=$(sed -n 's/^#define SPECDEC_VERSION_MAJOR \([0-9]*\)$/\1/p' include/specdec.h)
min=$(sed -n 's/^#define SPECDEC_VERSION_MINOR \([0-9]*\)$/\1/p' include/specdec.h)
pat=$(sed -n 's/^#define SPECDEC_VERSION_PATCH \([0-9]*\)$/\1/p' include/specdec.h)
[ -n "$version" ] && [ "$version" = "$maj.$min.$pat" ] && ok || bad "SPECDEC_VERSION $version vs $maj.$min.$pat"
for a in --version version -V; do
    [ "$($CLI $a)" = "specdec $version" ] && ok || bad "specdec $a: $($CLI $a)"
done
$CLI --help | grep -q "version" && ok || bad "--help lists version"
[ -e "$BUILD/libspecdec.so.$version" ] && ok || bad "shared library named after the version"

# every method of the registry in generate --help (the --spec entry is generated from the registry's choices) ...
help=$($CLI generate --help)
choices=$(echo "$help" | grep -A1 -- "--spec NAME" | sed -n 's/.*(\([a-z|-]*\), default none.*/\1/p')
[ "$choices" = "none|draft|ngram|early-exit|del|specbound|swift|auto" ] && ok || bad "generate --help methods: '$choices'"
# ... and each one listed is a method generate accepts (a name that is not one is refused)
M=$SHARED/models/stories260K.gguf
for m in $(echo "$choices" | tr '|' ' '); do
    extra=""; [ "$m" = draft ] && extra="--draft-model $M"
    $CLI generate -m "$M" -p "Once" -n 4 --temp 0 -t 1 --spec "$m" $extra >/dev/null 2>&1 && ok || bad "--spec $m refused"
done
$CLI generate -m "$M" -p "Once" -n 4 --spec no-such-method >/dev/null 2>&1 && bad "unknown method accepted" || ok
finish
