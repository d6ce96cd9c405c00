/* Bad input never crashes: truncated GGUF (every 1/16th), flipped header bytes, a tensor offset past the end,
 * an unknown architecture, a missing tensor, a wrong shape, bad llama2.c files, bad API arguments, a prompt
 * longer than the context, a full KV cache. Each must give a clear error (and nothing leaks: run under ASan). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "specdec.h"
#include "testlib.h"

static char tmpdir[256];

static const char *tmp_path(const char *name) {
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
    return buf;
}

/* Loads a byte image as a model: must fail with `want` status (0 = any error) and a message. */
static void expect_fail(const char *what, const unsigned char *data, size_t len, sd_status want, const char *needle) {
    const char *p = tmp_path("bad.gguf");
    tl_write_file(p, data, len);
    sd_model *m = (sd_model *)0x1;
    sd_error err = {0};
    sd_status st = sd_model_load(p, NULL, &m, &err);
    CHECK(st != SD_OK && m == NULL, "%s: loaded without error", what);
    if (st != SD_OK) {
        CHECK(err.msg[0] != 0, "%s: empty error message", what);
        if (want) CHECK(st == want, "%s: status %s, want %s (%s)", what, sd_status_str(st), sd_status_str(want), err.msg);
        if (needle) CHECK(strstr(err.msg, needle) != NULL, "%s: message '%s' lacks '%s'", what, err.msg, needle);
    } else {
        sd_model_free(m);
    }
}

static unsigned char *find(unsigned char *hay, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(hay + i, needle, k) == 0) return hay + i;
    return NULL;
}

static void test_gguf_corruptions(void) {
    size_t len;
    unsigned char *orig = tl_read_file(tl_shared("models/stories260K.gguf"), &len);
    CHECK(orig != NULL, "read stories260K.gguf");
    if (!orig) return;
    unsigned char *d = malloc(len);
    /* truncations at every 1/16th */
    for (int k = 0; k < 16; k++) {
        char what[64];
        snprintf(what, sizeof what, "truncated at %d/16", k);
        expect_fail(what, orig, len * (size_t)k / 16, 0, NULL);
    }
    expect_fail("truncated by one byte", orig, len - 1, SD_ERR_FORMAT, "past the end");
    /* flipped header bytes: magic, version, counts */
    for (int i = 0; i < 24; i++) {
        memcpy(d, orig, len);
        d[i] ^= 0xff;
        char what[64];
        snprintf(what, sizeof what, "header byte %d flipped", i);
        sd_model *m = NULL;
        tl_write_file(tmp_path("flip.gguf"), d, len);
        sd_error err = {0};
        sd_status st = sd_model_load(tmp_path("flip.gguf"), NULL, &m, &err);
        /* flipping high bytes of a count may still describe a valid file only if nothing changes: never here */
        CHECK(st != SD_OK && err.msg[0], "%s: accepted", what);
        sd_model_free(m);
    }
    /* unknown architecture: general.architecture = "llama" -> "llamx" */
    memcpy(d, orig, len);
    unsigned char *a = find(d, len, "general.architecture");
    unsigned char *v = a ? find(a, 64, "llama") : NULL;
    CHECK(v != NULL, "locate the architecture value");
    if (v) {
        v[4] = 'x';
        expect_fail("unknown architecture", d, len, SD_ERR_UNSUPPORTED, "llamx");
    }
    /* missing tensor: rename output_norm.weight */
    memcpy(d, orig, len);
    unsigned char *t = find(d, len, "output_norm.weight");
    CHECK(t != NULL, "locate output_norm.weight");
    if (t) {
        t[11] = 'X';
        expect_fail("missing tensor", d, len, SD_ERR_FORMAT, "output_norm.weight");
    }
    /* tensor offset past the end: the u64 after name, n_dims, dims, type */
    memcpy(d, orig, len);
    t = find(d, len, "blk.0.attn_q.weight");
    if (t) {
        unsigned char *q = t + strlen("blk.0.attn_q.weight");
        uint32_t nd;
        memcpy(&nd, q, 4);
        unsigned char *off = q + 4 + 8 * nd + 4;
        uint64_t big = (uint64_t)len * 4;
        big -= big % 32;
        memcpy(off, &big, 8);
        expect_fail("tensor offset past the end", d, len, SD_ERR_FORMAT, "past the end");
        /* misaligned offset */
        memcpy(d, orig, len);
        uint64_t o;
        memcpy(&o, off, 8);
        o += 4;
        memcpy(off, &o, 8);
        expect_fail("misaligned tensor offset", d, len, SD_ERR_FORMAT, "aligned");
        /* wrong shape: dims[0] of attn_q changed */
        memcpy(d, orig, len);
        uint64_t dim0;
        memcpy(&dim0, q + 4, 8);
        dim0 /= 2;
        memcpy(q + 4, &dim0, 8);
        expect_fail("wrong tensor shape", d, len, SD_ERR_FORMAT, "shape");
        /* unsupported type */
        memcpy(d, orig, len);
        uint32_t ty = 3; /* q4_1 */
        memcpy(q + 4 + 8 * nd, &ty, 4);
        expect_fail("unsupported tensor type", d, len, SD_ERR_UNSUPPORTED, "q4_1");
        /* a K-quant type on rows that are not whole 256-blocks */
        memcpy(d, orig, len);
        ty = 12; /* q4_K */
        memcpy(q + 4 + 8 * nd, &ty, 4);
        expect_fail("K-quant rows not whole blocks", d, len, SD_ERR_FORMAT, "multiple of the q4_K block");
    }
    /* huge string length in the first key */
    memcpy(d, orig, len);
    uint64_t huge = (uint64_t)1 << 60;
    memcpy(d + 24, &huge, 8);
    expect_fail("huge key length", d, len, SD_ERR_FORMAT, NULL);
    /* random garbage (neither GGUF nor llama2.c) */
    for (size_t i = 0; i < 4096; i++) d[i] = (unsigned char)(i * 131 + 7);
    expect_fail("garbage file", d, 4096, SD_ERR_FORMAT, NULL);
    expect_fail("empty file", d, 0, SD_ERR_FORMAT, "empty");
    free(d);
    free(orig);
}

/* general.alignment 1 or 2 lets an f32 tensor start off its 4-byte boundary: the load must refuse it, naming the
 * tensor, whatever the file's alignment says (the AVX2 kernels read the weights in place). A hand-built GGUF:
 * header (24 bytes), one u32 key (33), one 1-D f32 tensor entry (49): the data starts at byte 106 = 2 mod 4. */
static void put(unsigned char **p, const void *v, size_t n) {
    memcpy(*p, v, n);
    *p += n;
}
static void put_str(unsigned char **p, const char *s) {
    uint64_t n = strlen(s);
    put(p, &n, 8);
    put(p, s, (size_t)n);
}
static void test_misaligned_tensor(void) {
    const uint32_t als[] = {1, 2, 0, 3, 131072};
    for (size_t ai = 0; ai < sizeof als / sizeof als[0]; ai++) {
        const uint32_t al = als[ai];
        unsigned char buf[256], *p = buf;
        uint32_t u32;
        uint64_t u64;
        put(&p, "GGUF", 4);
        u32 = 3, put(&p, &u32, 4);
        u64 = 1, put(&p, &u64, 8); /* tensors */
        u64 = 1, put(&p, &u64, 8); /* metadata */
        put_str(&p, "general.alignment");
        u32 = 4 /* GGUF u32 */, put(&p, &u32, 4);
        put(&p, &al, 4);
        put_str(&p, "token_embd.weight");
        u32 = 1, put(&p, &u32, 4);
        u64 = 4, put(&p, &u64, 8);
        u32 = 0 /* f32 */, put(&p, &u32, 4);
        u64 = 0, put(&p, &u64, 8);
        CHECK(p - buf == 106, "layout: %d header bytes", (int)(p - buf));
        memset(p, 0, 16);
        p += 16;
        char what[64];
        snprintf(what, sizeof what, "f32 tensor misaligned by general.alignment %u", al);
        if (al == 1 || al == 2) {
            expect_fail(what, buf, (size_t)(p - buf), SD_ERR_FORMAT, "token_embd.weight");
            expect_fail(what, buf, (size_t)(p - buf), SD_ERR_FORMAT, "aligned");
        } else { /* not a power of two of sane size */
            expect_fail(what, buf, (size_t)(p - buf), SD_ERR_FORMAT, "is not a power of two");
        }
    }
}

/* A training context beyond what a context supports: the error names the file and says how to ask for less. */
static void test_huge_context_length(void) {
    size_t len;
    unsigned char *d = tl_read_file(tl_shared("models/stories260K.gguf"), &len);
    CHECK(d != NULL, "read stories260K.gguf");
    if (!d) return;
    unsigned char *k = find(d, len, "llama.context_length");
    CHECK(k != NULL, "locate llama.context_length");
    if (k) {
        unsigned char *v = k + strlen("llama.context_length");
        uint32_t ty, big = 1u << 24;
        memcpy(&ty, v, 4);
        CHECK(ty == 4 /* u32 */, "context_length type %u", ty);
        memcpy(v + 4, &big, 4);
        const char *p = tmp_path("bigctx.gguf");
        tl_write_file(p, d, len);
        sd_model *m = NULL;
        sd_error err = {0};
        if (sd_model_load(p, NULL, &m, &err) != SD_OK) {
            CHECK(0, "load: %s", err.msg);
        } else {
            sd_ctx *c = NULL;
            sd_ctx_params cp = sd_ctx_default_params();
            CHECK(sd_ctx_new(m, &cp, &c, &err) == SD_ERR_ARG && c == NULL, "context of 2^24 positions made");
            CHECK(strstr(err.msg, "bigctx.gguf") && strstr(err.msg, "-c N") && strstr(err.msg, "16777216"),
                  "huge context_length: '%s' lacks the file, the value or the hint", err.msg);
            cp.n_ctx = 64;
            CHECK(sd_ctx_new(m, &cp, &c, &err) == SD_OK, "a smaller context: %s", err.msg);
            sd_ctx_free(c);
            sd_model_free(m);
        }
    }
    free(d);
}

/* gen-model copies the vocabulary's tokenizer: one a model load could not build is an error, and nothing is written. */
static void test_gen_model_bad_vocab(void) {
    size_t len;
    unsigned char *d = tl_read_file(tl_shared("models/vocab/ggml-vocab-llama-spm.gguf"), &len);
    CHECK(d != NULL, "read the llama-spm vocabulary");
    if (!d) return;
    unsigned char *k = find(d, len, "tokenizer.ggml.model");
    unsigned char *v = k ? find(k, 64, "llama") : NULL;
    CHECK(v != NULL, "locate tokenizer.ggml.model");
    if (v) {
        v[4] = 'x'; /* "llamx": no such tokenizer */
        char vocp[600], outp[600]; /* (tmp_path's buffer is reused) */
        snprintf(vocp, sizeof vocp, "%s", tmp_path("badvocab.gguf"));
        snprintf(outp, sizeof outp, "%s", tmp_path("gen.gguf"));
        tl_write_file(vocp, d, len);
        sd_gen_model_params gp = {.shape = "test-tiny", .type = "f32", .vocab_path = vocp, .seed = 1};
        sd_error err = {0};
        sd_status st = sd_model_generate(&gp, outp, &err);
        CHECK(st != SD_OK && strstr(err.msg, "badvocab.gguf") && strstr(err.msg, "llamx"),
              "gen-model with an unusable vocabulary: status %s, '%s'", sd_status_str(st), err.msg);
        CHECK(access(outp, F_OK) != 0, "gen-model wrote %s from an unusable vocabulary", outp);
    }
    free(d);
}

/* stories260K.gguf with metadata entries added right after the header: `kv` holds n_kv serialized entries; a filler
 * string entry keeps the header growing by a multiple of 32 bytes, so the tensor data stays aligned and the
 * tensor offsets stay valid. Returns a malloc'd image and its length. */
static unsigned char *with_kvs(const unsigned char *orig, size_t len, const unsigned char *kv, size_t kv_len, uint64_t n_kv,
                               size_t *out_len) {
    size_t fill = 8 + 5 + 4 + 8, s = (32 - (kv_len + fill) % 32) % 32;
    unsigned char *d = malloc(len + kv_len + fill + s), *p = d;
    put(&p, orig, 24);
    put(&p, kv, kv_len);
    put_str(&p, "x.pad");
    uint32_t ty = 8 /* string */;
    put(&p, &ty, 4);
    uint64_t sl = s;
    put(&p, &sl, 8);
    memset(p, 'x', s);
    p += s;
    put(&p, orig + 24, len - 24);
    uint64_t n;
    memcpy(&n, d + 16, 8);
    n += n_kv + 1;
    memcpy(d + 16, &n, 8);
    *out_len = (size_t)(p - d);
    return d;
}

/* Hyperparameters are checked in one place: finite and within float range (an f64 beyond it is not silently inf);
 * a string with a NUL inside is no name ("llama\0x" is not "llama"). */
static void test_bad_hparams(void) {
    size_t len;
    unsigned char *orig = tl_read_file(tl_shared("models/stories260K.gguf"), &len);
    CHECK(orig != NULL, "read stories260K.gguf");
    if (!orig) return;
    struct {
        const char *what, *key;
        uint32_t type;
        double v;
    } cases[] = {
        {"rope.freq_base = inf (f32)", "llama.rope.freq_base", 6, INFINITY},
        {"rope.freq_base = nan (f32)", "llama.rope.freq_base", 6, NAN},
        {"rope.freq_base = 1e300 (f64)", "llama.rope.freq_base", 12, 1e300},
        {"rope.freq_base = -1e4 (f64)", "llama.rope.freq_base", 12, -1e4},
        {"rope.scaling.factor = 1e300 (f64)", "llama.rope.scaling.factor", 12, 1e300},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned char kv[128], *p = kv;
        put_str(&p, cases[i].key);
        put(&p, &cases[i].type, 4);
        if (cases[i].type == 6) {
            float f = (float)cases[i].v;
            put(&p, &f, 4);
        } else {
            put(&p, &cases[i].v, 8);
        }
        uint64_t nkv = 1;
        if (strstr(cases[i].key, "scaling")) { /* the factor is read when a scaling type is named */
            put_str(&p, "llama.rope.scaling.type");
            uint32_t ty = 8;
            put(&p, &ty, 4);
            put_str(&p, "linear");
            nkv++;
        }
        size_t n;
        unsigned char *d = with_kvs(orig, len, kv, (size_t)(p - kv), nkv, &n);
        expect_fail(cases[i].what, d, n, SD_ERR_FORMAT, cases[i].key);
        free(d);
    }
    /* the file as it is, with rope.freq_base as an f64 in float range: loads (the helper itself is sound) */
    {
        unsigned char kv[128], *p = kv;
        put_str(&p, "llama.rope.freq_base");
        uint32_t ty = 12;
        double v = 10000.0;
        put(&p, &ty, 4);
        put(&p, &v, 8);
        size_t n;
        unsigned char *d = with_kvs(orig, len, kv, (size_t)(p - kv), 1, &n);
        tl_write_file(tmp_path("ok.gguf"), d, n);
        sd_model *m = NULL;
        sd_error err = {0};
        CHECK(sd_model_load(tmp_path("ok.gguf"), NULL, &m, &err) == SD_OK, "f64 rope.freq_base 1e4: %s", err.msg);
        sd_model_free(m);
        free(d);
    }
    /* general.architecture "llama\0x": the original key renamed out of the way */
    unsigned char *a = find(orig, len, "general.architecture");
    CHECK(a != NULL, "locate general.architecture");
    if (a) {
        unsigned char *c = malloc(len);
        memcpy(c, orig, len);
        c[a - orig + 19] = 'f'; /* general.architecturf */
        unsigned char kv[128], *p = kv;
        put_str(&p, "general.architecture");
        uint32_t ty = 8;
        put(&p, &ty, 4);
        uint64_t sl = 7;
        put(&p, &sl, 8);
        put(&p, "llama\0x", 7);
        size_t n;
        unsigned char *d = with_kvs(c, len, kv, (size_t)(p - kv), 1, &n);
        expect_fail("architecture with a NUL", d, n, SD_ERR_FORMAT, "NUL");
        free(d);
        free(c);
    }
    free(orig);
}

static void test_llama2c_corruptions(void) {
    size_t len;
    unsigned char *orig = tl_read_file(tl_shared("models/stories260K.bin"), &len);
    if (!orig) {
        CHECK(0, "read stories260K.bin");
        return;
    }
    /* truncated .bin (the tokenizer must be found beside it: copy tok512.bin into the temp dir) */
    size_t tl;
    unsigned char *tok = tl_read_file(tl_shared("models/tok512.bin"), &tl);
    tl_write_file(tmp_path("tok512.bin"), tok, tl);
    for (int k = 1; k < 16; k += 3) {
        const char *p = tmp_path("bad.bin");
        tl_write_file(p, orig, len * (size_t)k / 16);
        sd_model *m = NULL;
        sd_error err = {0};
        CHECK(sd_model_load(p, NULL, &m, &err) != SD_OK && m == NULL, "truncated .bin %d/16 loaded", k);
    }
    /* intact model, missing tokenizer */
    const char *p2 = tmp_path("sub");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", p2);
    CHECK(system(cmd) == 0, "mkdir");
    char mp[600];
    snprintf(mp, sizeof mp, "%s/sub/model.bin", tmpdir);
    tl_write_file(mp, orig, len);
    sd_model *m = NULL;
    sd_error err = {0};
    CHECK(sd_model_load(mp, NULL, &m, &err) == SD_ERR_IO && strstr(err.msg, "--tokenizer"), "missing tokenizer: %s",
          err.msg);
    /* a tokenizer for another vocabulary */
    sd_model_params mpar = sd_model_default_params();
    mpar.tokenizer_path = tmp_path("bad.bin");
    tl_write_file(mpar.tokenizer_path, tok, tl / 2);
    CHECK(sd_model_load(mp, &mpar, &m, &err) == SD_ERR_FORMAT, "truncated tokenizer accepted");
    free(tok);
    free(orig);
}

static void test_api_args(void) {
    sd_model *m = NULL;
    sd_error err = {0};
    CHECK(sd_model_load("/nonexistent/model.gguf", NULL, &m, &err) == SD_ERR_IO && strstr(err.msg, "/nonexistent"),
          "missing file: %s", err.msg);
    CHECK(sd_model_load(tl_shared("models/vocab/ggml-vocab-llama-spm.gguf"), NULL, &m, &err) == SD_ERR_FORMAT,
          "vocab-only GGUF loaded as a model");
    if (sd_model_load(tl_shared("models/stories260K.gguf"), NULL, &m, &err) != SD_OK) {
        CHECK(0, "load: %s", err.msg);
        return;
    }
    sd_ctx *c = NULL;
    sd_ctx_params cp = sd_ctx_default_params();
    cp.n_batch = 0;
    CHECK(sd_ctx_new(m, &cp, &c, &err) == SD_ERR_ARG && c == NULL, "n_batch 0 accepted");
    cp = sd_ctx_default_params();
    cp.n_ctx = 16;
    cp.n_batch = 8;
    cp.n_threads = 2;
    CHECK(sd_ctx_new(m, &cp, &c, &err) == SD_OK, "ctx: %s", err.msg);
    int32_t toks[32];
    for (int i = 0; i < 32; i++) toks[i] = 100 + i;
    float logits[512];
    /* block larger than n_batch, bad token, bad layer range, bad seq, bad parent */
    CHECK(sd_forward(c, &(sd_block){.n = 9, .token = toks}, &(sd_forward_args){0}, &err) == SD_ERR_ARG, "n > n_batch");
    int32_t badtok = 512;
    CHECK(sd_forward(c, &(sd_block){.n = 1, .token = &badtok}, &(sd_forward_args){0}, &err) == SD_ERR_ARG &&
              strstr(err.msg, "vocabulary"),
          "token out of range");
    CHECK(sd_forward(c, &(sd_block){.n = 1, .token = toks}, &(sd_forward_args){.layer_begin = 3, .layer_end = 2}, &err) ==
              SD_ERR_ARG,
          "bad layer range");
    int32_t seq1 = 1;
    CHECK(sd_forward(c, &(sd_block){.n = 1, .token = toks, .seq = &seq1}, &(sd_forward_args){0}, &err) == SD_ERR_ARG,
          "bad sequence id");
    int32_t par[2] = {-1, 1};
    CHECK(sd_forward(c, &(sd_block){.n = 2, .token = toks, .parent = par}, &(sd_forward_args){0}, &err) == SD_ERR_ARG,
          "self parent");
    CHECK(sd_kv_len(c, 0, -1) == 0, "failed calls left entries in the cache");
    /* fill the cache: 16 positions, then one more must be CTX_FULL and change nothing */
    CHECK(sd_forward(c, &(sd_block){.n = 8, .token = toks}, &(sd_forward_args){0}, &err) == SD_OK, "fill 1");
    CHECK(sd_forward(c, &(sd_block){.n = 8, .token = toks}, &(sd_forward_args){.logits = logits}, &err) == SD_OK, "fill 2");
    CHECK(sd_forward(c, &(sd_block){.n = 1, .token = toks}, &(sd_forward_args){0}, &err) == SD_ERR_CTX_FULL &&
              sd_kv_len(c, 0, -1) == 16,
          "full cache: %s", err.msg);
    /* generation: prompt longer than the context, negative n_predict, empty prompt */
    sd_sampler_params sp = sd_sampler_default_params();
    sd_sampler *s = NULL;
    CHECK(sd_sampler_new(&sp, 512, &s, &err) == SD_OK, "sampler");
    CHECK(sd_generate(c, s, toks, 20, 1, false, NULL, NULL, NULL, NULL, NULL, &err) == SD_ERR_ARG &&
              strstr(err.msg, "context"),
          "prompt longer than the context: %s", err.msg);
    CHECK(sd_generate(c, s, toks, 4, -5, false, NULL, NULL, NULL, NULL, NULL, &err) == SD_ERR_ARG, "n_predict -5");
    CHECK(sd_generate(c, s, toks, 0, 4, false, NULL, NULL, NULL, NULL, NULL, &err) == SD_ERR_ARG, "empty prompt");
    /* sampler parameters */
    sd_sampler *s2 = NULL;
    sp.temp = -1;
    CHECK(sd_sampler_new(&sp, 512, &s2, &err) == SD_ERR_ARG && s2 == NULL, "negative temperature");
    sp = sd_sampler_default_params();
    sp.top_p = 0;
    CHECK(sd_sampler_new(&sp, 512, &s2, &err) == SD_ERR_ARG, "top-p 0");
    sp = sd_sampler_default_params();
    sp.min_p = 2;
    CHECK(sd_sampler_new(&sp, 512, &s2, &err) == SD_ERR_ARG, "min-p 2");
    /* tokenize into a small buffer */
    int n = 0;
    CHECK(sd_tokenize(m, "Once upon a time there was", 26, true, false, toks, 2, &n, &err) == SD_ERR_ARG && n > 2,
          "small token buffer");
    CHECK(sd_token_to_piece(m, 9999, (char *)logits, 16) == -1, "piece of a bad id");
    sd_sampler_free(s);
    sd_ctx_free(c);
    sd_model_free(m);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/specdec-test-XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    test_gguf_corruptions();
    test_misaligned_tensor();
    test_huge_context_length();
    test_gen_model_bad_vocab();
    test_bad_hparams();
    test_llama2c_corruptions();
    test_api_args();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", tmpdir);
    return tl_finish("test_bad_input");
}
