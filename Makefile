# specdec — build, test, demo. `make help` lists the targets.
CC       ?= cc
BUILD    ?= build
SHARED   ?= ../shared
OPT      ?= -O2
CFLAGS   ?= $(OPT) -g
CFLAGS   += -std=c11 -Wall -Wextra -Wshadow -Iinclude -Isrc -pthread
LDLIBS   += -lutf8proc -lm -pthread
SIMD     := -mavx2 -mfma -mf16c -DSPECDEC_HAVE_AVX2

LIB_SRC  := $(wildcard src/*/*.c)
LIB_OBJ  := $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRC))
TEST_SRC := $(wildcard tests/test_*.c)
TESTS    := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
LIB      := $(BUILD)/libspecdec.a
CLI      := $(BUILD)/specdec
EXAMPLE  := $(BUILD)/example_simple

.PHONY: all test check demo asan fuzz clean help loadtest loadtest-short
all: $(LIB) $(CLI) $(EXAMPLE) $(TESTS)

help:
	@echo "make          build the library, the CLI ($(CLI)), the example and the tests"
	@echo "make demo     generate a story with stories260K and print tokens/s"
	@echo "make check    the whole suite: tests, tests under ASan + UBSan, a short fuzz run (what CI runs)"
	@echo "make test     build and run the tests (optimised build only)"
	@echo "make asan     run the test suite under AddressSanitizer + UBSan (in build-asan/)"
	@echo "make fuzz     build and briefly run the GGUF reader fuzzer (clang libFuzzer)"
	@echo "make loadtest 64 clients against specdec serve for 5 minutes (loadtest-short: 30 s); LOAD_* in tests/loadtest.sh"

$(BUILD)/src/kernels/kern_avx2.o: src/kernels/kern_avx2.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SIMD) -MMD -MP -c $< -o $@

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The CLI; its server (tools/serve/) alone links libmicrohttpd and cJSON, so the library stays free of them.
CLI_OBJ  := $(patsubst %.c,$(BUILD)/%.o,$(wildcard tools/*.c tools/serve/*.c))
SERVE_LIBS := -lmicrohttpd -lcjson
$(BUILD)/tools/serve/%.o: CFLAGS += -Itools
$(CLI): $(CLI_OBJ) $(LIB)
	$(CC) $(CFLAGS) $^ -o $@ $(LDFLAGS) $(SERVE_LIBS) $(LDLIBS)

# the server's modules without the HTTP front, for their unit test
SERVE_UNIT_OBJ := $(patsubst %.c,$(BUILD)/%.o,tools/serve/chat_tpl.c tools/serve/serve_req.c tools/serve/serve_resp.c tools/serve/serve_metrics.c)
$(BUILD)/tests/test_serve_units.o: CFLAGS += -Itools/serve -Itools
$(BUILD)/tests/test_serve_units: $(BUILD)/tests/test_serve_units.o $(BUILD)/tests/testlib.o $(SERVE_UNIT_OBJ) $(LIB)
	$(CC) $(CFLAGS) $^ -o $@ $(LDFLAGS) -lcjson $(LDLIBS)

$(EXAMPLE): $(BUILD)/examples/simple.o $(LIB)
	$(CC) $(CFLAGS) $^ -o $@ $(LDFLAGS) $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(BUILD)/tests/testlib.o $(LIB)
	$(CC) $(CFLAGS) $^ -o $@ $(LDFLAGS) $(LDLIBS)

demo: $(CLI)
	$(CLI) generate -m $(SHARED)/models/stories260K.gguf -p "Once upon a time" -n 256 --temp 0.8 --seed 42

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

fuzz:
	$(MAKE) -C . BUILD=build-fuzz CC=clang OPT="-O1 -g -fsanitize=fuzzer-no-link,address,undefined" build-fuzz/libspecdec.a
	clang -O1 -g -fsanitize=fuzzer,address,undefined -Iinclude -Isrc tests/fuzz_gguf.c build-fuzz/libspecdec.a \
	    -o build-fuzz/fuzz_gguf -lutf8proc -lm -pthread
	mkdir -p build-fuzz/corpus && cp $(SHARED)/models/vocab/ggml-vocab-llama-spm.gguf $(SHARED)/models/stories260K.gguf build-fuzz/corpus/ 2>/dev/null || true
	build-fuzz/fuzz_gguf -max_total_time=$${FUZZ_SECONDS:-60} -max_len=65536 -rss_limit_mb=2048 build-fuzz/corpus

clean:
	rm -rf build build-asan build-fuzz

ALL_OBJ  := $(LIB_OBJ) $(CLI_OBJ) $(BUILD)/examples/simple.o $(BUILD)/tests/testlib.o $(TESTS:=.o)
-include $(ALL_OBJ:.o=.d)
