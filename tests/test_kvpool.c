/* The KV page pool (stories260K, pages of 64 cells):
 *  - bookkeeping: reserve / truncate / copy / keep take and give back whole pages; reserve beyond n_ctx is
 *    SD_ERR_CTX_FULL and beyond the pool SD_ERR_NOMEM ("KV pool exhausted"), changing nothing;
 *  - a sequence that cannot get a page fails alone: the others keep working and their caches do not change, bit
 *    for bit (alone in a block or together with a working sequence);
 *  - 1,000 short sequences through 4 slots sharing a pool too small for all of them: outputs bit-equal to a
 *    context with the full preallocated-size pool, usage == the pages the live sequences need after every step,
 *    and 0 once all are cleared;
 *  - trim returns the free pages' memory;
 * all of it with the float cache and again with kv_type f16, whose pages hold halves (half the memory: its trim
 * returns at most 3/4 of what the float cache's returns). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "specdec.h"
#include "testlib.h"

enum { N_CTX = 256, PAGE = 64 };

static int kv_type = SD_KV_F32; /* the contexts' KV cache type (main runs every check with each) */

static sd_ctx *mkctx_t(sd_model *m, int n_seq, int n_ctx, int n_kv_cells, int threads) {
    sd_ctx_params cp = sd_ctx_default_params();
    cp.n_ctx = n_ctx;
    cp.n_seq = n_seq;
    cp.n_batch = 16;
    cp.n_threads = threads;
    cp.n_kv_cells = n_kv_cells;
    cp.kv_type = kv_type;
    return tl_ctx_with(m, &cp);
}

static sd_ctx *mkctx(sd_model *m, int n_seq, int n_ctx, int n_kv_cells) {
    return mkctx_t(m, n_seq, n_ctx, n_kv_cells, 2);
}

static int used(const sd_ctx *c) {
    int u = -1;
    sd_kv_pool_usage(c, &u, NULL);
    return u;
}

/* n tokens appended to seq (a chain), the last position's logits into logits (may be NULL) */
static sd_status feed(sd_ctx *c, int seq, const int32_t *tok, int n, float *logits, sd_error *err) {
    sd_block b = {.n = n, .token = tok, .seq_all = seq};
    sd_forward_args a = {.logits = logits};
    return sd_forward(c, &b, &a, err);
}

static void fill(int32_t *tok, int n, int salt, int V) {
    for (int i = 0; i < n; i++) tok[i] = (int32_t)((i * 7919 + salt * 104729 + 13) % V);
}

/* every K/V row of seq, all layers, positions [0, len of the layer) */
typedef struct snap {
    float *rows; /* [n_layer][N_CTX][2][kvd] */
    int len[64];
} snap;

static void take_snap(const sd_ctx *c, int seq, int n_layer, int kvd, snap *s) {
    s->rows = calloc((size_t)n_layer * N_CTX * 2 * kvd, sizeof(float));
    for (int l = 0; l < n_layer; l++) {
        s->len[l] = sd_kv_len(c, seq, l);
        for (int p = 0; p < s->len[l]; p++) {
            float *r = s->rows + (((size_t)l * N_CTX + p) * 2) * kvd;
            sd_kv_read(c, seq, l, p, r, r + kvd, NULL);
        }
    }
}

static bool same_snap(const snap *a, const snap *b, int n_layer, int kvd) {
    for (int l = 0; l < n_layer; l++)
        if (a->len[l] != b->len[l]) return false;
    return memcmp(a->rows, b->rows, (size_t)n_layer * N_CTX * 2 * kvd * sizeof(float)) == 0;
}

static void check_params(sd_model *m) {
    sd_ctx_params cp = sd_ctx_default_params();
    CHECK(cp.n_kv_cells == 0, "default n_kv_cells is 0");
    cp.n_ctx = 64;
    cp.n_kv_cells = -1;
    sd_ctx *c = NULL;
    sd_error err;
    CHECK(sd_ctx_new(m, &cp, &c, &err) == SD_ERR_ARG && !c, "n_kv_cells -1 is refused");
    c = mkctx(m, 3, 40, 0);
    int cap = 0;
    sd_kv_pool_usage(c, NULL, &cap);
    CHECK(c && sd_kv_page_cells(c) == 40 && cap == 120 && used(c) == 0, "n_ctx 40: pages of 40, capacity 3 x 40 (%d)", cap);
    sd_ctx_free(c);
    c = mkctx(m, 2, 100, 0);
    sd_kv_pool_usage(c, NULL, &cap);
    CHECK(c && sd_kv_page_cells(c) == PAGE && cap == 2 * 2 * PAGE, "n_ctx 100: 2 x 2 pages of 64 (%d)", cap);
    sd_ctx_free(c);
    c = mkctx(m, 4, N_CTX, 1);
    sd_kv_pool_usage(c, NULL, &cap);
    CHECK(c && cap == PAGE, "n_kv_cells 1: one page (%d)", cap);
    sd_ctx_free(c);
}

static void check_bookkeeping(sd_model *m, int V, int n_layer, int kvd) {
    sd_ctx *c = mkctx(m, 4, N_CTX, 4 * PAGE);
    if (!c) return;
    sd_error err;
    int32_t tok[N_CTX];
    fill(tok, N_CTX, 1, V);
    CHECK(used(c) == 0, "fresh pool is empty");
    CHECK(sd_kv_reserve(c, 0, 1, &err) == SD_OK && used(c) == PAGE, "reserve 1 takes a page (%d)", used(c));
    CHECK(sd_kv_reserve(c, 0, PAGE, &err) == SD_OK && used(c) == PAGE, "reserve 64 stays in the page");
    CHECK(sd_kv_reserve(c, 0, PAGE + 1, &err) == SD_OK && used(c) == 2 * PAGE, "reserve 65 takes two");
    CHECK(sd_kv_reserve(c, 0, N_CTX + 1, &err) == SD_ERR_CTX_FULL && used(c) == 2 * PAGE, "beyond n_ctx: CTX_FULL");
    CHECK(sd_kv_reserve(c, 1, N_CTX, &err) == SD_ERR_NOMEM && strstr(err.msg, "KV pool exhausted") &&
              used(c) == 2 * PAGE && sd_kv_len(c, 1, -1) == 0,
          "beyond the pool: NOMEM, nothing taken (%s)", err.msg);
    CHECK(sd_kv_reserve(c, 1, -1, &err) == SD_ERR_ARG && sd_kv_reserve(c, 4, 1, &err) == SD_ERR_ARG, "bad reserve args");
    CHECK(sd_kv_truncate(c, 0, 0, &err) == SD_OK && used(c) == 0, "truncate 0 gives the pages back");

    /* forward takes pages as the sequence grows; truncate gives back the whole pages past the cut */
    CHECK(feed(c, 0, tok, 16, NULL, &err) == SD_OK && used(c) == PAGE, "16 tokens: one page");
    for (int p = 16; p < 100; p += 12) feed(c, 0, tok + p, p + 12 <= 100 ? 12 : 100 - p, NULL, &err);
    CHECK(sd_kv_len(c, 0, -1) == 100 && used(c) == 2 * PAGE, "100 tokens: two pages (%d)", used(c));
    CHECK(sd_kv_truncate(c, 0, 120, &err) == SD_OK && used(c) == 2 * PAGE && sd_kv_len(c, 0, -1) == 100, "truncate past the end");
    CHECK(sd_kv_truncate(c, 0, 65, &err) == SD_OK && used(c) == 2 * PAGE, "truncate to 65 keeps both");
    CHECK(sd_kv_truncate(c, 0, 64, &err) == SD_OK && used(c) == PAGE && sd_kv_len(c, 0, -1) == 64, "truncate to 64 frees one");
    for (int p = 64; p < 100; p += 12) feed(c, 0, tok + p, 12, NULL, &err);
    CHECK(sd_kv_len(c, 0, -1) == 100 && used(c) == 2 * PAGE, "regrown to 100");

    /* copy: dst gets its own pages; a copy that does not fit changes nothing */
    snap s0, s1;
    take_snap(c, 0, n_layer, kvd, &s0);
    CHECK(sd_kv_copy_seq(c, 0, 1, &err) == SD_OK && used(c) == 4 * PAGE, "copy takes two pages (%d)", used(c));
    take_snap(c, 1, n_layer, kvd, &s1);
    CHECK(same_snap(&s0, &s1, n_layer, kvd), "the copy's rows equal the source's");
    free(s1.rows);
    CHECK(sd_kv_copy_seq(c, 0, 2, &err) == SD_ERR_NOMEM && strstr(err.msg, "KV pool exhausted") &&
              sd_kv_len(c, 2, -1) == 0 && used(c) == 4 * PAGE,
          "copy into a full pool: NOMEM, dst unchanged");
    CHECK(sd_kv_copy_seq(c, 0, 1, &err) == SD_OK && used(c) == 4 * PAGE, "copy over an equal copy takes nothing");
    CHECK(sd_kv_truncate(c, 1, 10, &err) == SD_OK && used(c) == 3 * PAGE, "truncate the copy to 10");
    CHECK(sd_kv_copy_seq(c, 1, 0, &err) == SD_OK && used(c) == 2 * PAGE && sd_kv_len(c, 0, -1) == 10,
          "copying a short sequence over a long one gives pages back (%d)", used(c));

    /* keep: moves cells across pages, then gives back the pages past start + n */
    sd_kv_truncate(c, 0, 0, NULL);
    sd_kv_truncate(c, 1, 0, NULL);
    for (int p = 0; p < 112; p += 16) feed(c, 0, tok + p, 16, NULL, &err);
    take_snap(c, 0, n_layer, kvd, &s1);
    const int32_t keep[4] = {1, 5, 10, 40}; /* cells 61, 65, 70, 100 -> 60..63 */
    CHECK(sd_kv_keep(c, 0, 60, keep, 4, &err) == SD_OK && sd_kv_len(c, 0, -1) == 64 && used(c) == PAGE,
          "keep 4 at 60: length 64, one page (%d)", used(c));
    const size_t kv2 = 2 * (size_t)kvd;
    float *r = malloc(kv2 * sizeof(float));
    bool moved = true;
    for (int l = 0; l < n_layer; l++)
        for (int i = 0; i < 64; i++) {
            int from = i < 60 ? i : 60 + keep[i - 60];
            sd_kv_read(c, 0, l, i, r, r + kvd, NULL);
            moved &= memcmp(r, s1.rows + ((size_t)l * N_CTX + from) * kv2, kv2 * sizeof(float)) == 0;
        }
    CHECK(moved, "kept cells hold the moved rows, the rest unchanged");
    free(r);
    free(s0.rows);
    free(s1.rows);
    sd_kv_truncate(c, 0, 0, NULL);
    CHECK(used(c) == 0, "all cleared");
    sd_ctx_free(c);
}

/* A sequence that cannot get a page fails alone: the others' caches stay bit for bit, and they keep working with
 * the logits of a context that never ran short. */
static void check_fail_alone(sd_model *m, int V, int n_layer, int kvd) {
    sd_ctx *c = mkctx(m, 3, N_CTX, 4 * PAGE), *ref = mkctx(m, 1, N_CTX, 0);
    if (!c || !ref) return;
    sd_error err;
    int32_t tok[128];
    fill(tok, 128, 2, V);
    float *la = malloc((size_t)2 * V * sizeof(float)), *lb = la + V;
    for (int p = 0; p < 100; p += 10) {
        feed(c, 0, tok + p, 10, NULL, &err);
        feed(ref, 0, tok + p, 10, NULL, &err);
    }
    CHECK(sd_kv_reserve(c, 1, 2 * PAGE, &err) == SD_OK && used(c) == 4 * PAGE, "pool full: 2 + 2 pages");
    snap before, after;
    take_snap(c, 0, n_layer, kvd, &before);
    CHECK(feed(c, 2, tok, 1, NULL, &err) == SD_ERR_NOMEM && strstr(err.msg, "KV pool exhausted"),
          "a third sequence gets no page: %s", err.msg);
    CHECK(sd_kv_len(c, 2, -1) == 0 && used(c) == 4 * PAGE, "the failed sequence holds nothing");
    /* a block of a working sequence and a failing one: the block fails as a whole, nothing changes */
    const int32_t seqs[2] = {0, 2}, btok[2] = {tok[100], tok[0]};
    sd_block b = {.n = 2, .token = btok, .seq = seqs};
    sd_forward_args a = {0};
    CHECK(sd_forward(c, &b, &a, &err) == SD_ERR_NOMEM && used(c) == 4 * PAGE, "mixed block: NOMEM");
    take_snap(c, 0, n_layer, kvd, &after);
    CHECK(same_snap(&before, &after, n_layer, kvd), "the working sequence's cache did not change");
    free(after.rows);
    /* sequence 0 keeps going (its second page has room up to 128 cells) with the big pool's bits */
    bool same = true;
    for (int p = 100; p < 128 && same; p++) {
        CHECK(feed(c, 0, tok + p, 1, la, &err) == SD_OK, "seq 0 at %d: %s", p, err.msg);
        feed(ref, 0, tok + p, 1, lb, &err);
        same = memcmp(la, lb, (size_t)V * sizeof(float)) == 0;
    }
    CHECK(same, "seq 0 logits equal the big pool's");
    CHECK(feed(c, 0, tok, 1, NULL, &err) == SD_ERR_NOMEM && sd_kv_len(c, 0, -1) == 128, "seq 0 at 128 needs a page");
    sd_kv_truncate(c, 1, 0, NULL);
    CHECK(feed(c, 0, tok, 1, NULL, &err) == SD_OK && feed(c, 2, tok, 1, NULL, &err) == SD_OK &&
              used(c) == 4 * PAGE,
          "pages given back by seq 1 serve seqs 0 and 2");
    free(before.rows);
    free(la);
    sd_ctx_free(c);
    sd_ctx_free(ref);
}

/* ---- many short sequences through a small pool */
enum { SLOTS = 4, MAX_STEPS = 6 };
typedef struct job {
    int id, prompt, steps; /* steps: decode steps still to run; prompt: its length (0 once fed) */
    int32_t tok[PAGE * 2];
    int len;
    uint64_t hash; /* FNV-1a over every logits row's bits */
} job;

static int prompt_len(int id) { return id % 11 == 0 ? 70 + id % 13 : 2 + id % 7; } /* some cross a page */
static void job_init(job *j, int id, int V) {
    memset(j, 0, sizeof *j);
    j->id = id;
    j->prompt = prompt_len(id);
    j->steps = 1 + id % MAX_STEPS;
    fill(j->tok, j->prompt, id, V);
    j->hash = 1469598103934665603ull;
}
static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}
static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* one step of j on seq: the prompt (in blocks of up to 16), or a greedy decode step; false when it failed */
static sd_status job_step(sd_ctx *c, int seq, job *j, int V, float *logits, sd_error *err) {
    if (j->len < j->prompt) {
        int n = j->prompt - j->len < 16 ? j->prompt - j->len : 16;
        sd_status st = feed(c, seq, j->tok + j->len, n, logits, err);
        if (st) return st;
        j->len += n;
    } else {
        sd_status st = feed(c, seq, j->tok + j->len - 1, 1, logits, err);
        if (st) return st;
        j->steps--;
    }
    j->hash = hash_bytes(j->hash, logits, (size_t)V * sizeof(float));
    if (j->len >= j->prompt) j->tok[j->len++] = (int32_t)argmax(logits, V);
    return SD_OK;
}
/* tok[len - 1] is the token the next decode step feeds: after the prompt, the greedy token was appended */

static void check_many(sd_model *m, int V) {
    const int n_jobs = (int)(1000 * tl_scale()) < 20 ? 20 : (int)(1000 * tl_scale());
    sd_ctx *ref = mkctx_t(m, 1, N_CTX, 0, 1), *c = mkctx_t(m, SLOTS, N_CTX, 4 * PAGE, 1);
    if (!c || !ref) return;
    float *logits = malloc((size_t)V * sizeof(float));
    uint64_t *want = malloc((size_t)n_jobs * sizeof *want);
    sd_error err;
    for (int id = 0; id < n_jobs; id++) { /* reference: one at a time in a full-size pool */
        job j;
        job_init(&j, id, V);
        sd_kv_truncate(ref, 0, 0, NULL);
        while (j.len < j.prompt || j.steps > 0)
            if (job_step(ref, 0, &j, V, logits, &err)) CHECK(0, "reference %d: %s", id, err.msg);
        want[id] = j.hash;
    }
    job slot[SLOTS];
    bool busy[SLOTS] = {false};
    int next = 0, done = 0, mismatches = 0, nomem = 0, bad_usage = 0, other = 0;
    for (long iter = 0; done < n_jobs && iter < 100L * n_jobs; iter++) {
        int s = (int)(iter % SLOTS);
        if (!busy[s]) {
            if (next >= n_jobs) continue;
            job_init(&slot[s], next++, V);
            busy[s] = true;
        }
        sd_status st = job_step(c, s, &slot[s], V, logits, &err);
        if (st == SD_ERR_NOMEM) nomem++;
        else if (st) other++;
        if (!st && slot[s].len >= slot[s].prompt && slot[s].steps == 0) {
            mismatches += slot[s].hash != want[slot[s].id];
            sd_kv_truncate(c, s, 0, NULL);
            busy[s] = false;
            done++;
        }
        int need = 0; /* pages the live sequences hold: their lengths' pages */
        for (int k = 0; k < SLOTS; k++) need += (sd_kv_len(c, k, -1) + PAGE - 1) / PAGE * PAGE;
        bad_usage += used(c) != need;
    }
    CHECK(done == n_jobs, "%d of %d sequences finished", done, n_jobs);
    CHECK(mismatches == 0, "%d sequences' logits differ from the big pool's", mismatches);
    CHECK(other == 0, "%d steps failed with another error", other);
    CHECK(nomem > 0, "the small pool ran out at times (%d refusals), and those sequences waited", nomem);
    CHECK(bad_usage == 0, "usage == the live sequences' pages after every step (%d steps off)", bad_usage);
    CHECK(used(c) == 0, "usage back to 0 once every sequence is cleared (%d)", used(c));
    printf("  %d sequences through %d slots, a pool of 4 pages: %d refusals, all bit-equal\n", n_jobs, SLOTS, nomem);
    free(want);
    free(logits);
    sd_ctx_free(c);
    sd_ctx_free(ref);
}

/* n tokens appended to seq in blocks of 16 (n_batch), the last position's logits into logits */
static sd_status feed_all(sd_ctx *c, int seq, const int32_t *tok, int n, float *logits, sd_error *err) {
    sd_status st = SD_OK;
    for (int i = 0; i < n && !st; i += 16) st = feed(c, seq, tok + i, n - i < 16 ? n - i : 16, i + 16 >= n ? logits : NULL, err);
    return st;
}

/* resident set size in KiB (Linux /proc), -1 when unknown */
static long rss_kib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = -1, res = -1;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = -1;
        fclose(f);
    }
    return res < 0 ? -1 : res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* sd_ctx_trim: the free pages' memory goes back to the OS, held pages keep their bits, freed pages come back on
 * demand and compute exactly what they computed before */
static void check_trim(sd_model *m, int V, int n_layer, int kvd) {
    enum { S = 8, C = 512 };
    sd_ctx *c = mkctx(m, S, C, 0), *ref = mkctx(m, 1, C, 0);
    if (!c || !ref) return;
    sd_error err;
    static int32_t tok[S][C];
    float *lg_a = malloc((size_t)V * sizeof(float)), *lg_b = malloc((size_t)V * sizeof(float));
    for (int s = 0; s < S; s++) {
        fill(tok[s], C, s + 3, V);
        CHECK(feed_all(c, s, tok[s], s == 0 ? 100 : C - 8, NULL, &err) == SD_OK, "fill seq %d: %s", s, err.msg);
    }
    snap before, after;
    take_snap(c, 0, n_layer, kvd, &before);
    for (int s = 1; s < S; s++) CHECK(sd_kv_truncate(c, s, 0, &err) == SD_OK, "clear seq %d", s);
    const int held = used(c);
    long r0 = rss_kib();
    sd_ctx_trim(c);
    long r1 = rss_kib();
    take_snap(c, 0, n_layer, kvd, &after);
    CHECK(used(c) == held && same_snap(&before, &after, n_layer, kvd), "trim keeps the held pages' bits");
    /* 7 sequences x 504 cells of K and V were written and released: floats, or halves with kv_type f16 */
    const long f32_kib = (long)(7 * 504) * n_layer * kvd * 2 * (long)sizeof(float) / 1024;
    const long freed_kib = kv_type == SD_KV_F16 ? f32_kib / 2 : f32_kib;
    if (r0 >= 0 && r1 >= 0) {
        CHECK(r0 - r1 >= freed_kib / 2, "trim returns the free pages' memory (RSS %ld -> %ld KiB, %ld KiB freed)", r0, r1,
              freed_kib);
        if (kv_type == SD_KV_F16)
            CHECK(r0 - r1 <= f32_kib * 3 / 4, "f16 pages hold halves: trim returned %ld KiB, floats would be %ld KiB",
                  r0 - r1, f32_kib);
        printf("  kv %s: trim returned %ld KiB (the pages' K/V values: %ld KiB)\n", kv_type == SD_KV_F16 ? "f16" : "f32",
               r0 - r1, freed_kib);
    }
    /* the freed pages are taken again and give the same bits as a context that never trimmed */
    CHECK(feed_all(c, 1, tok[1], 200, lg_a, &err) == SD_OK && feed_all(ref, 0, tok[1], 200, lg_b, &err) == SD_OK &&
              memcmp(lg_a, lg_b, (size_t)V * sizeof(float)) == 0,
          "a sequence on re-mapped pages computes what it did before");
    CHECK(feed_all(c, 0, tok[0] + 100, 50, lg_a, &err) == SD_OK && sd_kv_truncate(ref, 0, 0, &err) == SD_OK &&
              feed_all(ref, 0, tok[0], 150, lg_b, &err) == SD_OK && memcmp(lg_a, lg_b, (size_t)V * sizeof(float)) == 0,
          "a held sequence goes on exactly after a trim");
    sd_ctx_trim(NULL);
    free(before.rows);
    free(after.rows);
    free(lg_a);
    free(lg_b);
    sd_ctx_free(ref);
    sd_ctx_free(c);
}

int main(void) {
    sd_model *m = NULL;
    sd_error err;
    if (sd_model_load(tl_shared("models/stories260K.gguf"), NULL, &m, &err) != SD_OK) {
        CHECK(0, "load: %s", err.msg);
        return tl_finish("test_kvpool");
    }
    sd_model_info info;
    sd_model_get_info(m, &info);
    const int kvd = info.n_head_kv * (info.n_embd / info.n_head);
    check_params(m);
    for (int t = 0; t < 2; t++) {
        kv_type = t ? SD_KV_F16 : SD_KV_F32;
        check_bookkeeping(m, info.n_vocab, info.n_layer, kvd);
        check_fail_alone(m, info.n_vocab, info.n_layer, kvd);
        check_many(m, info.n_vocab);
        check_trim(m, info.n_vocab, info.n_layer, kvd);
    }
    sd_model_free(m);
    return tl_finish("test_kvpool");
}
