#!/bin/sh
# The Python binding (python/specdec) over $BUILD/libspecdec.so: tests/test_python.py.
BUILD=${BUILD:-build}
if ldd "$BUILD/libspecdec.so" 2>/dev/null | grep -q 'libasan\|libubsan'; then
    # python cannot load a sanitizer build's library (the sanitizer runtime must come first)
    echo "test_python: 0 passed, 0 failed (skipped: sanitizer build)"
    exit 0
fi
if ! command -v python3 >/dev/null 2>&1; then
    echo "test_python: 0 passed, 1 failed (no python3: sh scripts/deps.sh check)"
    exit 1
fi
PYTHONDONTWRITEBYTECODE=1 SPECDEC_LIB="$BUILD/libspecdec.so" PYTHONPATH=python exec python3 tests/test_python.py
