/* Invariants of the forward pass on every test model:
 *  - batch invariance: the logits of position i are bit-identical whether computed alone or inside blocks of
 *    2..16, 31 and 40 positions (the kernels' tiles for long blocks), and with 1 or 2 threads;
 *  - KV rollback: generate, truncate back k positions, regenerate == a run that never went there (logits and
 *    every cached K/V row, bit for bit);
 *  - tree blocks: a node's logits equal those of the chain made of its ancestors. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "specdec.h"
#include "testlib.h"

enum { N_SEQ = 40 };
static int kv_type = SD_KV_F32; /* the contexts' KV cache type (a second pass runs kv_type f16) */

static sd_ctx *new_ctx(sd_model *m, int threads) {
    sd_ctx_params cp = sd_ctx_default_params();
    cp.n_ctx = 128;
    cp.n_batch = N_SEQ;
    cp.n_threads = threads;
    cp.kv_type = kv_type;
    sd_ctx *c = NULL;
    sd_error err;
    if (sd_ctx_new(m, &cp, &c, &err) != SD_OK) fprintf(stderr, "ctx: %s\n", err.msg);
    return c;
}

/* logits of all N_SEQ positions, fed in chunks of k. out: [N_SEQ][V] */
static bool run_chunks(sd_ctx *c, const int32_t *seq, int k, int V, float *out) {
    sd_kv_truncate(c, 0, 0, NULL);
    uint8_t want[N_SEQ];
    memset(want, 1, sizeof want);
    for (int i = 0; i < N_SEQ; i += k) {
        int n = N_SEQ - i < k ? N_SEQ - i : k;
        sd_block b = {.n = n, .token = seq + i};
        sd_forward_args a = {.want_logits = want, .logits = out + (size_t)i * V};
        if (sd_forward(c, &b, &a, NULL) != SD_OK) return false;
    }
    return true;
}

static void check_batch_invariance(const char *name, sd_model *m, int V) {
    int32_t seq[N_SEQ];
    for (int i = 0; i < N_SEQ; i++) seq[i] = (int32_t)((i * 7919 + 13) % V);
    seq[0] = sd_token_bos(m) >= 0 ? sd_token_bos(m) : seq[0];
    float *ref = malloc((size_t)N_SEQ * V * sizeof *ref), *got = malloc((size_t)N_SEQ * V * sizeof *got);
    sd_ctx *c1 = new_ctx(m, 1), *c2 = new_ctx(m, 2);
    CHECK(c1 && c2 && run_chunks(c1, seq, 1, V, ref), "%s: reference run", name);
    int bad_k = 0;
    static const int kl[] = {2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 31, N_SEQ};
    for (size_t ki = 0; ki < sizeof kl / sizeof kl[0]; ki++) {
        const int k = kl[ki];
        CHECK(run_chunks(c1, seq, k, V, got), "%s: run k=%d", name, k);
        bool same = memcmp(ref, got, (size_t)N_SEQ * V * sizeof *ref) == 0;
        if (!same) bad_k = k;
        CHECK(same, "%s: blocks of %d change the logits' bits", name, k);
    }
    int ks[] = {1, 3, 8, 16, N_SEQ};
    for (int i = 0; i < 5; i++) {
        CHECK(run_chunks(c2, seq, ks[i], V, got), "%s: 2-thread run", name);
        CHECK(memcmp(ref, got, (size_t)N_SEQ * V * sizeof *ref) == 0, "%s: 2 threads (blocks of %d) change the bits",
              name, ks[i]);
    }
    printf("  %-22s batch invariance over blocks 1..16, 31, %d and 1/2 threads: %s\n", name, N_SEQ, bad_k ? "FAILED" : "bit-identical");
    sd_ctx_free(c1);
    sd_ctx_free(c2);
    free(ref);
    free(got);
}

static int greedy_step(sd_ctx *c, int32_t tok, int V, float *logits) {
    sd_block b = {.n = 1, .token = &tok};
    sd_forward_args a = {.logits = logits};
    if (sd_forward(c, &b, &a, NULL) != SD_OK) return -1;
    int best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

static void check_rollback(const char *name, sd_model *m, int V) {
    sd_model_info info;
    sd_model_get_info(m, &info);
    sd_ctx *a = new_ctx(m, 2), *b = new_ctx(m, 2);
    float *la = malloc((size_t)V * sizeof *la), *lb = malloc((size_t)V * sizeof *lb);
    const int P = 6, GEN = 20, BACK = 7;
    int32_t prompt[6] = {1, 5, 9, 300 % V, 77 % V, 42};
    if (sd_token_bos(m) >= 0) prompt[0] = sd_token_bos(m);
    /* b: prefill, decode GEN tokens, truncate BACK positions, decode again */
    sd_block pb = {.n = P, .token = prompt};
    sd_forward_args pa = {.logits = lb};
    sd_forward(b, &pb, &pa, NULL);
    int32_t tb[64];
    int nb = 0;
    int32_t t = 0;
    for (int i = 0; i < V; i++) t = lb[i] > lb[t] ? i : t;
    tb[nb++] = t;
    for (int i = 0; i < GEN; i++) tb[nb++] = t = greedy_step(b, t, V, lb);
    int keep = P + GEN - BACK; /* cached positions after rollback */
    CHECK(sd_kv_truncate(b, 0, keep, NULL) == SD_OK && sd_kv_len(b, 0, -1) == keep, "%s: truncate", name);
    /* a: the run that never went past `keep` */
    sd_forward(a, &pb, &(sd_forward_args){.logits = la}, NULL);
    for (int i = 0; i + P < keep; i++) greedy_step(a, tb[i], V, la);
    /* both continue from tb[keep - P] */
    bool same = true;
    for (int i = keep - P; i < GEN; i++) {
        int ta = greedy_step(a, tb[i], V, la), tb2 = greedy_step(b, tb[i], V, lb);
        same &= ta == tb2 && memcmp(la, lb, (size_t)V * sizeof *la) == 0;
    }
    CHECK(same, "%s: logits after rollback differ from a run that never went there", name);
    bool kv_same = sd_kv_len(a, 0, -1) == sd_kv_len(b, 0, -1);
    int kvd = info.n_head_kv * (info.n_embd / info.n_head);
    float *ka = malloc((size_t)kvd * 4 * sizeof(float)), *va = ka + kvd, *kb = va + kvd, *vb = kb + kvd;
    for (int l = 0; l < info.n_layer && kv_same; l++)
        for (int p = 0; p < sd_kv_len(a, 0, l); p++) {
            sd_kv_read(a, 0, l, p, ka, va, NULL);
            sd_kv_read(b, 0, l, p, kb, vb, NULL);
            kv_same &= memcmp(ka, kb, (size_t)kvd * 2 * sizeof(float)) == 0;
        }
    CHECK(kv_same, "%s: KV cache after rollback differs", name);
    free(ka);
    free(la);
    free(lb);
    sd_ctx_free(a);
    sd_ctx_free(b);
}

static void check_tree(const char *name, sd_model *m, int V) {
    sd_ctx *c = new_ctx(m, 2);
    int32_t pre[4] = {1, 20, 30, 40};
    if (sd_token_bos(m) >= 0) pre[0] = sd_token_bos(m);
    /* chains: pre + [a, b] and pre + [a, x] */
    int32_t ch1[6] = {pre[0], pre[1], pre[2], pre[3], 11, 12}, ch2[6] = {pre[0], pre[1], pre[2], pre[3], 11, 13};
    float *l1 = malloc((size_t)V * 3 * sizeof *l1), *l2 = l1 + V, *lt = l2 + V;
    sd_forward(c, &(sd_block){.n = 6, .token = ch1}, &(sd_forward_args){.logits = l1}, NULL);
    sd_kv_truncate(c, 0, 0, NULL);
    sd_forward(c, &(sd_block){.n = 6, .token = ch2}, &(sd_forward_args){.logits = l2}, NULL);
    /* tree: prefix, then block [a (root), b (child of a), x (child of a)] */
    sd_kv_truncate(c, 0, 0, NULL);
    sd_forward(c, &(sd_block){.n = 4, .token = pre}, &(sd_forward_args){0}, NULL);
    int32_t tt[3] = {11, 12, 13}, par[3] = {-1, 0, 0}, pos[3] = {4, 5, 5};
    uint8_t want[3] = {0, 1, 1};
    float *lt2 = malloc((size_t)V * 2 * sizeof *lt2);
    sd_error err;
    sd_status st = sd_forward(c, &(sd_block){.n = 3, .token = tt, .parent = par, .pos = pos},
                              &(sd_forward_args){.want_logits = want, .logits = lt2}, &err);
    CHECK(st == SD_OK, "%s: tree forward: %s", name, st ? err.msg : "");
    CHECK(memcmp(lt2, l1, (size_t)V * sizeof *lt) == 0, "%s: tree node b != chain [a, b]", name);
    CHECK(memcmp(lt2 + V, l2, (size_t)V * sizeof *lt) == 0, "%s: tree node x != chain [a, x]", name);
    free(lt2);
    free(l1);
    sd_ctx_free(c);
}

int main(void) {
    setenv("SPECDEC_PAR_MIN_WORK", "0", 1); /* split every matmul and attention across the threads */
    for (int i = 0; i < TL_N_MODELS; i++) {
        sd_model *m;
        sd_error err;
        if (sd_model_load(tl_shared(TL_MODELS[i].file), NULL, &m, &err) != SD_OK) {
            CHECK(0, "load %s: %s", TL_MODELS[i].name, err.msg);
            continue;
        }
        sd_model_info info;
        sd_model_get_info(m, &info);
        check_batch_invariance(TL_MODELS[i].name, m, info.n_vocab);
        check_rollback(TL_MODELS[i].name, m, info.n_vocab);
        check_tree(TL_MODELS[i].name, m, info.n_vocab);
        sd_model_free(m);
    }
    /* K-quant files: q2_k (Q2_K, Q3_K, Q6_K) and q3_k_m (Q3_K, Q4_K, Q5_K, Q6_K) hold every K-quant type */
    static const char *const KQ[] = {"models/kquant/stories-ee-w768-q2_k.gguf", "models/kquant/stories-ee-w768-q3_k_m.gguf"};
    for (int i = 0; i < 2; i++) {
        sd_model *m;
        sd_error err;
        if (sd_model_load(tl_shared(KQ[i]), NULL, &m, &err) != SD_OK) {
            CHECK(0, "load %s: %s", KQ[i], err.msg);
            continue;
        }
        sd_model_info info;
        sd_model_get_info(m, &info);
        const char *name = strrchr(KQ[i], '/') + 1;
        check_batch_invariance(name, m, info.n_vocab);
        check_rollback(name, m, info.n_vocab);
        check_tree(name, m, info.n_vocab);
        /* kv_type f16 (llama.cpp's fp16 cache and attention arithmetic): the same invariants */
        kv_type = SD_KV_F16;
        char name16[96];
        snprintf(name16, sizeof name16, "%s kv f16", name);
        check_batch_invariance(name16, m, info.n_vocab);
        check_rollback(name16, m, info.n_vocab);
        check_tree(name16, m, info.n_vocab);
        kv_type = SD_KV_F32;
        sd_model_free(m);
    }
    return tl_finish("test_invariance");
}
