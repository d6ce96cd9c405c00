#include "model/accept_head.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf_write.h"
#include "model/exit_heads.h"
#include "util/err.h"

static sd_accept_head *alloc_head(int D, int blocks, bool shared) {
    if (D < 1 || blocks < 0 || blocks > ACCEPT_HEAD_MAX_BLOCKS) return NULL;
    sd_accept_head *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->dim = D;
    h->blocks = blocks;
    h->shared = shared;
    h->n_sets = shared ? (blocks > 0) : blocks;
    h->W = calloc((size_t)h->n_sets * D * D + 1, sizeof(float));
    h->b = calloc((size_t)h->n_sets * D + 1, sizeof(float));
    h->w_out = calloc((size_t)D, sizeof(float));
    if (!h->W || !h->b || !h->w_out) {
        sd_accept_head_free(h);
        return NULL;
    }
    return h;
}

sd_accept_head *accept_head_new(const sd_model *m, int depth, int blocks, bool shared) {
    sd_accept_head *h = alloc_head(m->hp.n_embd, blocks, shared);
    if (!h) return NULL;
    h->n_embd = m->hp.n_embd;
    h->n_layer = m->hp.n_layer;
    h->n_vocab = m->hp.n_vocab;
    h->depth = depth;
    h->model_check = exit_heads_model_check(m);
    return h;
}

bool accept_head_set_skip(sd_accept_head *h, const uint8_t *mask) {
    const size_t n = 2 * (size_t)h->n_layer;
    uint8_t *m = malloc(n);
    if (!m) return false;
    h->n_skip = 0;
    for (size_t i = 0; i < n; i++) h->n_skip += (m[i] = mask[i] != 0);
    free(h->skip);
    h->skip = m;
    return true;
}

int sd_accept_head_skip_set(const sd_accept_head *h, uint8_t *mask) {
    if (!h || !h->skip) return 0;
    if (mask) memcpy(mask, h->skip, 2 * (size_t)h->n_layer);
    return h->n_skip;
}

void sd_accept_head_free(sd_accept_head *h) {
    if (!h) return;
    free(h->skip);
    free(h->W);
    free(h->b);
    free(h->w_out);
    free(h);
}

float accept_head_logit(const sd_accept_head *h, const float *y, float *x, float *pre) {
    const int D = h->dim;
    double ss = 0;
    for (int i = 0; i < D; i++) ss += (double)y[i] * y[i];
    const float r = (float)(1.0 / sqrt(ss / D + 1e-6));
    for (int i = 0; i < D; i++) x[i] = y[i] * r;
    for (int j = 0; j < h->blocks; j++) {
        const float *W = accept_head_W(h, j), *b = accept_head_b(h, j), *xi = x + (size_t)j * D;
        float *xo = x + (size_t)(j + 1) * D, *pj = pre + (size_t)j * D;
        for (int o = 0; o < D; o++) {
            float s = b[o];
            const float *w = W + (size_t)o * D;
            for (int i = 0; i < D; i++) s += w[i] * xi[i];
            pj[o] = s;
            xo[o] = xi[o] + s / (1.0f + expf(-s));
        }
    }
    const float *xk = x + (size_t)h->blocks * D;
    float z = h->b_out;
    for (int i = 0; i < D; i++) z += h->w_out[i] * xk[i];
    return z;
}

float accept_head_prob(const sd_accept_head *h, const float *y, float *scratch) {
    float z = accept_head_logit(h, y, scratch, scratch + (size_t)(h->blocks + 1) * h->dim);
    return 1.0f / (1.0f + expf(-z));
}

/* ------------------------------------------------------------------ the file */
typedef struct save_ctx {
    const sd_accept_head *h;
} save_ctx;

/* tensors: per weight set W, b; then w_out, b_out */
static void save_row(void *user, int ti, int64_t row, float *out) {
    const sd_accept_head *h = ((save_ctx *)user)->h;
    const int D = h->dim;
    if (ti < 2 * h->n_sets) {
        int j = ti / 2;
        if (ti % 2 == 0) memcpy(out, h->W + ((size_t)j * D + (size_t)row) * D, (size_t)D * sizeof *out);
        else memcpy(out, h->b + (size_t)j * D, (size_t)D * sizeof *out);
    } else if (ti == 2 * h->n_sets) {
        memcpy(out, h->w_out, (size_t)D * sizeof *out);
    } else {
        out[0] = h->b_out;
    }
}

sd_status accept_head_save(const sd_accept_head *h, const char *path, sd_error *err) {
    gguf_writer *w = gguf_writer_new();
    if (!w) return err_set(err, SD_ERR_NOMEM, "out of memory");
    gguf_writer_str(w, "general.architecture", "specdec-accept-head");
    gguf_writer_u32(w, "specdec.accept_head.n_embd", (uint32_t)h->n_embd);
    gguf_writer_u32(w, "specdec.accept_head.n_layer", (uint32_t)h->n_layer);
    gguf_writer_u32(w, "specdec.accept_head.n_vocab", (uint32_t)h->n_vocab);
    gguf_writer_u32(w, "specdec.accept_head.model_check", h->model_check);
    gguf_writer_u32(w, "specdec.accept_head.depth", (uint32_t)h->depth);
    gguf_writer_u32(w, "specdec.accept_head.blocks", (uint32_t)h->blocks);
    gguf_writer_bool(w, "specdec.accept_head.shared", h->shared);
    char *mask = NULL;
    if (h->skip) { /* SWIFT: the skip set as '0'/'1' */
        if (!(mask = malloc(2 * (size_t)h->n_layer + 1))) {
            gguf_writer_free(w);
            return err_set(err, SD_ERR_NOMEM, "out of memory");
        }
        for (int i = 0; i < 2 * h->n_layer; i++) mask[i] = h->skip[i] ? '1' : '0';
        mask[2 * h->n_layer] = 0;
        gguf_writer_str(w, "specdec.accept_head.skip_mask", mask);
    }
    const int64_t ne2[2] = {h->dim, h->dim}, ne1[1] = {h->dim}, ne0[1] = {1};
    for (int j = 0; j < h->n_sets; j++) {
        char name[64];
        snprintf(name, sizeof name, "accept.blk.%d.weight", j);
        gguf_writer_tensor(w, name, GGML_F32, 2, ne2);
        snprintf(name, sizeof name, "accept.blk.%d.bias", j);
        gguf_writer_tensor(w, name, GGML_F32, 1, ne1);
    }
    gguf_writer_tensor(w, "accept.out.weight", GGML_F32, 1, ne1);
    gguf_writer_tensor(w, "accept.out.bias", GGML_F32, 1, ne0);
    save_ctx sc = {h};
    sd_status st = gguf_writer_write(w, path, save_row, &sc, NULL, err);
    gguf_writer_free(w);
    free(mask);
    return st;
}

sd_status sd_accept_head_save(const sd_accept_head *h, const char *path, sd_error *err) {
    if (!h || !path) return err_set(err, SD_ERR_ARG, "sd_accept_head_save: NULL argument");
    return accept_head_save(h, path, err);
}

static bool tensor_is(const gguf_tensor *t, int n_dims, int64_t ne0, int64_t ne1) {
    return t && t->type == GGML_F32 && (int)t->n_dims == n_dims && t->ne[0] == ne0 && (n_dims < 2 || t->ne[1] == ne1);
}

sd_status sd_accept_head_load(const char *path, sd_accept_head **out, sd_error *err) {
    if (!path || !out) return err_set(err, SD_ERR_ARG, "sd_accept_head_load: NULL argument");
    *out = NULL;
    gguf_file f;
    sd_status st = gguf_open(&f, path, err);
    if (st) return st;
    gguf_str arch;
    int64_t D = 0, L = 0, V = 0, chk = 0, dep = 0, k = 0;
    bool shared = false;
    if (!gguf_get_str(&f, "general.architecture", &arch, NULL) || !gguf_str_eq(arch, "specdec-accept-head") ||
        !gguf_get_int(&f, "specdec.accept_head.n_embd", &D, NULL) ||
        !gguf_get_int(&f, "specdec.accept_head.n_layer", &L, NULL) ||
        !gguf_get_int(&f, "specdec.accept_head.n_vocab", &V, NULL) ||
        !gguf_get_int(&f, "specdec.accept_head.model_check", &chk, NULL) ||
        !gguf_get_int(&f, "specdec.accept_head.depth", &dep, NULL) ||
        !gguf_get_int(&f, "specdec.accept_head.blocks", &k, NULL) ||
        !gguf_get_bool(&f, "specdec.accept_head.shared", &shared, NULL)) {
        gguf_close(&f);
        return err_set(err, SD_ERR_FORMAT, "%s: not an acceptance-head file (made by `specdec train accept-head`)", path);
    }
    if (D < 1 || D > 65536 || L < 1 || L > 4096 || V < 1 || dep < 1 || dep > L || k < 0 || k > ACCEPT_HEAD_MAX_BLOCKS) {
        gguf_close(&f);
        return err_set(err, SD_ERR_FORMAT, "%s: acceptance head with invalid shape (dim %lld, %lld blocks, depth %lld of %lld)",
                       path, (long long)D, (long long)k, (long long)dep, (long long)L);
    }
    sd_accept_head *h = alloc_head((int)D, (int)k, shared);
    if (!h) {
        gguf_close(&f);
        return err_set(err, SD_ERR_NOMEM, "out of memory");
    }
    h->n_embd = (int)D, h->n_layer = (int)L, h->n_vocab = (int)V, h->depth = (int)dep;
    h->model_check = (uint32_t)chk;
    gguf_str sm;
    bool bad_str = false;
    if (gguf_get_str(&f, "specdec.accept_head.skip_mask", &sm, &bad_str)) { /* SWIFT */
        uint8_t *mask = malloc(2 * (size_t)L);
        bool ok = sm.len == 2 * (uint64_t)L && dep == L;
        for (int64_t i = 0; ok && mask && i < 2 * L; i++) {
            ok = sm.p[i] == '0' || sm.p[i] == '1';
            if (ok) mask[i] = sm.p[i] == '1';
        }
        /* SWIFT's sets skip interior sub-layers only: the first and last layers always run */
        if (ok && mask) ok = !mask[0] && !mask[1] && !mask[2 * L - 2] && !mask[2 * L - 1];
        if (!mask || (ok && !accept_head_set_skip(h, mask))) st = err_set(err, SD_ERR_NOMEM, "out of memory");
        else if (!ok || h->n_skip == 0)
            st = err_set(err, SD_ERR_FORMAT, "%s: the SWIFT skip set is damaged (expected %lld characters 0/1 with at "
                         "least one 1, the first and last layers' two not skipped)", path, (long long)(2 * L));
        free(mask);
    } else if (bad_str) {
        st = err_set(err, SD_ERR_FORMAT, "%s: specdec.accept_head.skip_mask is not a string", path);
    }
    for (int j = 0; !st && j < h->n_sets; j++) {
        char nw[64], nb[64];
        snprintf(nw, sizeof nw, "accept.blk.%d.weight", j);
        snprintf(nb, sizeof nb, "accept.blk.%d.bias", j);
        const gguf_tensor *tw = gguf_find_tensor(&f, nw), *tb = gguf_find_tensor(&f, nb);
        if (!tensor_is(tw, 2, D, D) || !tensor_is(tb, 1, D, 1)) {
            st = err_set(err, SD_ERR_FORMAT, "%s: block %d is missing or has the wrong shape or type", path, j);
            break;
        }
        memcpy(h->W + (size_t)j * D * D, tw->data, (size_t)D * D * sizeof(float));
        memcpy(h->b + (size_t)j * D, tb->data, (size_t)D * sizeof(float));
    }
    const gguf_tensor *tw = gguf_find_tensor(&f, "accept.out.weight"), *tb = gguf_find_tensor(&f, "accept.out.bias");
    if (!st && (!tensor_is(tw, 1, D, 1) || !tensor_is(tb, 1, 1, 1)))
        st = err_set(err, SD_ERR_FORMAT, "%s: the output layer is missing or has the wrong shape or type", path);
    if (!st) {
        memcpy(h->w_out, tw->data, (size_t)D * sizeof(float));
        memcpy(&h->b_out, tb->data, sizeof(float));
    }
    gguf_close(&f);
    if (st) {
        sd_accept_head_free(h);
        return st;
    }
    *out = h;
    return SD_OK;
}

static bool same_model(const sd_accept_head *h, const sd_model *m) {
    return h->n_embd == m->hp.n_embd && h->n_layer == m->hp.n_layer && h->n_vocab == m->hp.n_vocab &&
           h->model_check == exit_heads_model_check(m);
}

static sd_status other_model(const sd_accept_head *h, const sd_model *m, sd_error *err) {
    bool same_shape = h->n_embd == m->hp.n_embd && h->n_layer == m->hp.n_layer && h->n_vocab == m->hp.n_vocab;
    return err_set(err, SD_ERR_ARG,
                   "acceptance head was trained for another %s (head: dim %d, %d layers, vocab %d; drafter: "
                   "dim %d, %d layers, vocab %d%s)", h->skip ? "target" : "draft model",
                   h->n_embd, h->n_layer, h->n_vocab, m->hp.n_embd, m->hp.n_layer, m->hp.n_vocab,
                   same_shape ? ", other weights" : "");
}

sd_status sd_accept_head_check(const sd_accept_head *h, const sd_model *m, int depth, sd_error *err) {
    if (!h || !m) return err_set(err, SD_ERR_ARG, "sd_accept_head_check: NULL argument");
    if (h->skip)
        return err_set(err, SD_ERR_ARG, "acceptance head was trained for SWIFT's layer-skipping drafter (%d of the "
                       "target's sub-layers skipped), not for this drafter", h->n_skip);
    if (same_model(h, m) && h->depth == depth) return SD_OK;
    if (same_model(h, m))
        return err_set(err, SD_ERR_ARG,
                       "acceptance head was trained on the state after %d of this model's layers, but the drafter "
                       "runs %d (train one for this exit layer)", h->depth, depth);
    return other_model(h, m, err);
}

sd_status sd_accept_head_check_swift(const sd_accept_head *h, const sd_model *target, int n_skip, sd_error *err) {
    if (!h || !target) return err_set(err, SD_ERR_ARG, "sd_accept_head_check_swift: NULL argument");
    if (!h->skip)
        return err_set(err, SD_ERR_ARG, "acceptance head was trained for another drafter (%s), not SWIFT's layer "
                       "skipping (train one with `specdec train accept-head --skip-set FILE` or --swift)",
                       h->depth == h->n_layer ? "a draft model" : "early exit");
    if (!same_model(h, target)) return other_model(h, target, err);
    if (h->n_skip != n_skip)
        return err_set(err, SD_ERR_ARG, "acceptance head was trained on a SWIFT skip set of %d sub-layers, but the "
                       "drafter skips %d (another skip ratio: train one for it)", h->n_skip, n_skip);
    return SD_OK;
}
