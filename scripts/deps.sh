#!/bin/sh
# deps.sh: the Debian packages specdec needs (deps/debian-packages), checked and installed in one place.
#   sh scripts/deps.sh list      the packages, one line
#   sh scripts/deps.sh check     exit 0 when all are installed; else name the missing ones and the apt-get line, exit 1
#   sh scripts/deps.sh ensure    install the missing ones when root (apt-get, non-interactive); when not root, print
#                                the exact `sudo apt-get install -y ...` line and exit 1
# Environment (for tests): SPECDEC_DEPS_LIST (the list file), SPECDEC_DEPS_UID (the user id to act as),
# SPECDEC_APT_GET (the apt-get command run when root), SPECDEC_DPKG_QUERY (the dpkg-query command).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
list=${SPECDEC_DEPS_LIST:-$here/deps/debian-packages}
apt=${SPECDEC_APT_GET:-apt-get}
dpkgq=${SPECDEC_DPKG_QUERY:-dpkg-query}
uid=${SPECDEC_DEPS_UID:-$(id -u)}

if [ ! -r "$list" ]; then
    echo "deps: cannot read the package list $list" >&2
    exit 2
fi
packages=$(sed -e 's/#.*//' "$list" | tr -s ' \t' '\n\n' | grep -v '^$' | tr '\n' ' ' | sed 's/ $//')

missing_packages() { # prints the packages dpkg does not report as installed
    for p in $packages; do
        st=$($dpkgq -W -f='${Status}' "$p" 2>/dev/null)
        case "$st" in *" installed") ;; *) printf '%s ' "$p" ;; esac
    done
}

cmd=${1:-check}
case "$cmd" in
list)
    echo "$packages"
    exit 0
    ;;
check|ensure) ;;
*)
    echo "usage: sh scripts/deps.sh list|check|ensure" >&2
    exit 2
    ;;
esac

if ! command -v "${dpkgq%% *}" >/dev/null 2>&1; then
    echo "deps: no dpkg-query here (not Debian?): cannot check the packages; the build needs: $packages" >&2
    exit 0
fi
missing=$(missing_packages | sed 's/ $//')
[ -z "$missing" ] && exit 0

if [ "$cmd" = ensure ] && [ "$uid" = 0 ]; then
    echo "deps: installing $missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    $apt update -qq >/dev/null || { echo "deps: apt-get update failed" >&2; exit 1; }
    # shellcheck disable=SC2086
    if ! $apt install -y -qq $missing >/dev/null; then
        echo "deps: apt-get install -y $missing failed" >&2
        exit 1
    fi
    still=$(missing_packages | sed 's/ $//')
    if [ -n "$still" ]; then
        echo "deps: still missing after apt-get: $still" >&2
        exit 1
    fi
    exit 0
fi
echo "deps: missing Debian packages: $missing" >&2
if [ "$uid" = 0 ]; then
    echo "deps: install them with:" >&2
    echo "    apt-get install -y $missing" >&2
else
    echo "deps: install them with (then run the command again):" >&2
    echo "    sudo apt-get install -y $missing" >&2
fi
exit 1
