# specdec — build, test, demo. `make help` lists the targets.
CC       ?= cc
BUILD    ?= build
SHARED   ?= ../shared
OPT      ?= -O2
CFLAGS   ?= $(OPT) -g
CFLAGS   += -std=c11 -Wall -Wextra -Wshadow -Iinclude -Isrc -pthread
LDLIBS   += -lutf8proc -lm -pthread
SIMD     := -mavx2 -mfma -mf16c -DSPECDEC_HAVE_AVX2 -DSPECDEC_HAVE_AVX512
# only src/kernels/*_avx512.c (reached through the avx512 table after its CPUID check)
SIMD512  := -mavx512f -mavx512bw -mavx512vl -mavx512vnni
# Library objects are position-independent (one set of objects for libspecdec.a and libspecdec.so; with the
# toolchain's default PIE the code is the same but for calls between exported functions, which
# -fno-semantic-interposition keeps direct).
PIC      := -fPIC -fno-semantic-interposition

# The version comes from one place, include/specdec.h.
VERSION  := $(shell sed -n 's/^\#define SPECDEC_VERSION "\(.*\)"/\1/p' include/specdec.h)
SOMAJOR  := $(firstword $(subst ., ,$(VERSION)))
SONAME   := libspecdec.so.$(SOMAJOR)

# make install PREFIX=... [DESTDIR=...]
PREFIX   ?= /usr/local
BINDIR   ?= $(PREFIX)/bin
LIBDIR   ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
LDCONFIG ?= ldconfig

LIB_SRC  := $(wildcard src/*/*.c)
LIB_OBJ  := $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRC))
TEST_SRC := $(wildcard tests/test_*.c)
TESTS    := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
LIB      := $(BUILD)/libspecdec.a
SHLIB    := $(BUILD)/libspecdec.so.$(VERSION)
CLI      := $(BUILD)/specdec
EXAMPLE  := $(BUILD)/example_simple

.PHONY: all test check demo deps asan fuzz clean help install uninstall loadtest loadtest-short
all: $(LIB) $(SHLIB) $(CLI) $(EXAMPLE) $(TESTS)

help:
	@echo "make          build the libraries (libspecdec.a, libspecdec.so), the CLI ($(CLI)), the example and the tests"
	@echo "make demo     install missing Debian packages (as root; else print the apt-get line), build, generate a story"
	@echo "make deps     only check the Debian packages (deps/debian-packages) and print the apt-get line for missing ones"
	@echo "make check    the whole suite: tests, tests under ASan + UBSan, a 30 s server load test, a short fuzz run (what CI runs)"
	@echo "make test     build and run the tests (optimised build only)"
	@echo "make install  PREFIX=/usr/local [DESTDIR=]: libspecdec.so.$(VERSION) (+ links), libspecdec.a, specdec.h,"
	@echo "              specdec.pc, the specdec binary;  make uninstall (same PREFIX) removes exactly those"
	@echo "make asan     run the test suite under AddressSanitizer + UBSan (in build-asan/)"
	@echo "make fuzz     build and briefly run the fuzzers: GGUF reader, model load + forward, JSONL (clang libFuzzer)"
	@echo "make loadtest 64 clients against specdec serve for 5 minutes (loadtest-short: 30 s); LOAD_* in tests/loadtest.sh"

$(BUILD)/src/kernels/%_avx2.o: src/kernels/%_avx2.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PIC) $(SIMD) -MMD -MP -c $< -o $@

$(BUILD)/src/kernels/%_avx512.o: src/kernels/%_avx512.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PIC) $(SIMD) $(SIMD512) -MMD -MP -c $< -o $@

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/src/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PIC) -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# libspecdec.so.X.Y.Z, soname libspecdec.so.X, and the links libspecdec.so.X and libspecdec.so beside it; exports
# only the public sd_* names (src/libspecdec.map).
$(SHLIB): $(LIB_OBJ) src/libspecdec.map
	$(CC) $(CFLAGS) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=src/libspecdec.map -Wl,--no-undefined \
	    $(LIB_OBJ) -o $@ $(LDFLAGS) $(LDLIBS)
	ln -sf $(notdir $@) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $(BUILD)/libspecdec.so

# The CLI; its server (tools/serve/) alone links libmicrohttpd and cJSON, so the library stays free of them.
CLI_OBJ  := $(patsubst %.c,$(BUILD)/%.o,$(wildcard tools/*.c tools/serve/*.c))
SERVE_LIBS := -lmicrohttpd -lcjson
$(BUILD)/tools/serve/%.o: CFLAGS += -Itools
$(CLI): $(CLI_OBJ) $(LIB)
	$(CC) $(CFLAGS) $^ -o $@ $(LDFLAGS) $(SERVE_LIBS) $(LDLIBS)

# the server's modules without the HTTP front, for their unit test
SERVE_UNIT_OBJ := $(patsubst %.c,$(BUILD)/%.o,tools/serve/chat_tpl.c tools/serve/serve_req.c tools/serve/serve_resp.c tools/serve/serve_metrics.c tools/spec_cli.c)
$(BUILD)/tests/test_serve_units.o: CFLAGS += -Itools/serve -Itools
$(BUILD)/tests/test_serve_units: $(BUILD)/tests/test_serve_units.o $(BUILD)/tests/testlib.o $(SERVE_UNIT_OBJ) $(LIB)
	$(CC) $(CFLAGS) $^ -o $@ $(LDFLAGS) -lcjson $(LDLIBS)

$(EXAMPLE): $(BUILD)/examples/simple.o $(LIB)
	$(CC) $(CFLAGS) $^ -o $@ $(LDFLAGS) $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(BUILD)/tests/testlib.o $(LIB)
	$(CC) $(CFLAGS) $^ -o $@ $(LDFLAGS) $(LDLIBS)

# The README's first command: the Debian packages first (installed when root; else the apt-get line and a stop), then
# the build and the story.
demo:
	@sh scripts/deps.sh ensure
	@$(MAKE) --no-print-directory $(CLI)
	$(CLI) generate -m $(SHARED)/models/stories260K.gguf -p "Once upon a time" -n 120 --temp 0.8 --seed 42

deps:
	@sh scripts/deps.sh check

test: all
	BUILD=$(BUILD) SHARED=$(SHARED) sh tests/run.sh

loadtest: $(CLI)
	BUILD=$(BUILD) SHARED=$(SHARED) LOAD_CLIENTS=$${LOAD_CLIENTS:-64} LOAD_SECONDS=$${LOAD_SECONDS:-300} sh tests/loadtest.sh

loadtest-short: $(CLI)
	BUILD=$(BUILD) SHARED=$(SHARED) LOAD_CLIENTS=$${LOAD_CLIENTS:-64} LOAD_SECONDS=$${LOAD_SECONDS:-30} sh tests/loadtest.sh

check:
	SHARED=$(SHARED) sh tests/check.sh

asan:
	SPECDEC_TEST_SCALE=0.1 $(MAKE) BUILD=build-asan OPT="-O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined" \
	    LDFLAGS="-fsanitize=address,undefined" test

# Three libFuzzer targets, FUZZ_SECONDS (default 60) split between them: the GGUF reader (fuzz_gguf), a whole model
# load + one forward pass (fuzz_model; seeds: stories260K and test-tiny models of every weight type written with
# gen-model, so inputs stay under FUZZ_MODEL_MAX bytes) and the JSONL prompt reader (fuzz_jsonl; seeds: lines of
# the shared prompt sets). UBSan findings abort (no recovery), so a misaligned load is a crash, not a log line.
# Without use-after-scope checks: with them clang's ASan takes ~7 minutes per K-quant kernel file (hundreds of
# inlined vector arrays; 10 s without). gcc's ASan build (make asan) keeps them.
FUZZ_SAN       := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-sanitize-address-use-after-scope
FUZZ_MODEL_MAX ?= 1310720
fuzz: $(CLI)
	$(MAKE) -C . BUILD=build-fuzz CC=clang OPT="-O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-sanitize-address-use-after-scope" \
	    build-fuzz/libspecdec.a
	for t in gguf model; do \
	    clang -O1 -g $(FUZZ_SAN) -Iinclude -Isrc tests/fuzz_$$t.c build-fuzz/libspecdec.a -o build-fuzz/fuzz_$$t \
	        -lutf8proc -lm -pthread || exit 1; done
	clang -O1 -g $(FUZZ_SAN) -Iinclude -Isrc -Itools tests/fuzz_jsonl.c tools/jsonl.c build-fuzz/libspecdec.a \
	    -o build-fuzz/fuzz_jsonl -lutf8proc -lm -pthread
	mkdir -p build-fuzz/corpus build-fuzz/corpus-model build-fuzz/corpus-jsonl
	cp $(SHARED)/models/vocab/ggml-vocab-llama-spm.gguf $(SHARED)/models/stories260K.gguf build-fuzz/corpus/ 2>/dev/null || true
	cp $(SHARED)/models/stories260K.gguf build-fuzz/corpus-model/
	for ty in f32 f16 bf16 q8_0 q4_0; do [ -s build-fuzz/corpus-model/tiny-$$ty.gguf ] || \
	    $(CLI) gen-model --shape test-tiny --type $$ty --vocab $(SHARED)/models/stories260K.gguf \
	        -o build-fuzz/corpus-model/tiny-$$ty.gguf 2>/dev/null || exit 1; done
	cat $(SHARED)/data/*.jsonl | awk 'NR <= 64 { print > ("build-fuzz/corpus-jsonl/line" NR ".jsonl") }'
	T=$${FUZZ_SECONDS:-60}; \
	build-fuzz/fuzz_gguf -max_total_time=$$((T / 3)) -max_len=65536 -rss_limit_mb=2048 build-fuzz/corpus && \
	build-fuzz/fuzz_model -max_total_time=$$((T / 3)) -max_len=$(FUZZ_MODEL_MAX) -rss_limit_mb=2048 -timeout=20 build-fuzz/corpus-model && \
	build-fuzz/fuzz_jsonl -max_total_time=$$((T - 2 * (T / 3))) -max_len=8192 -rss_limit_mb=2048 build-fuzz/corpus-jsonl

INSTALLED := $(BINDIR)/specdec $(LIBDIR)/libspecdec.a $(LIBDIR)/libspecdec.so.$(VERSION) $(LIBDIR)/$(SONAME) \
             $(LIBDIR)/libspecdec.so $(INCLUDEDIR)/specdec.h $(PKGCONFIGDIR)/specdec.pc

install: $(LIB) $(SHLIB) $(CLI)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR)
	install -m 755 $(CLI) $(DESTDIR)$(BINDIR)/specdec
	install -m 644 $(LIB) $(DESTDIR)$(LIBDIR)/libspecdec.a
	install -m 755 $(SHLIB) $(DESTDIR)$(LIBDIR)/libspecdec.so.$(VERSION)
	ln -sf libspecdec.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libspecdec.so
	install -m 644 include/specdec.h $(DESTDIR)$(INCLUDEDIR)/specdec.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	    -e 's|@VERSION@|$(VERSION)|' specdec.pc.in >$(DESTDIR)$(PKGCONFIGDIR)/specdec.pc
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then $(LDCONFIG) || true; fi

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then $(LDCONFIG) || true; fi

clean:
	rm -rf build build-asan build-fuzz

ALL_OBJ  := $(LIB_OBJ) $(CLI_OBJ) $(BUILD)/examples/simple.o $(BUILD)/tests/testlib.o $(TESTS:=.o)
-include $(ALL_OBJ:.o=.d)
