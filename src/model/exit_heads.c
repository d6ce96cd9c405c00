#include "model/exit_heads.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf_write.h"
#include "util/err.h"

uint32_t exit_heads_model_check(const sd_model *m) {
    uint32_t h = 2166136261u;
    const unsigned char *p = (const unsigned char *)m->out_norm;
    for (size_t i = 0; i < (size_t)m->hp.n_embd * sizeof(float); i++) h = (h ^ p[i]) * 16777619u;
    int dims[3] = {m->hp.n_embd, m->hp.n_layer, m->hp.n_vocab};
    p = (const unsigned char *)dims;
    for (size_t i = 0; i < sizeof dims; i++) h = (h ^ p[i]) * 16777619u;
    return h;
}

static sd_exit_heads *alloc_heads(int L, int D, int V) {
    sd_exit_heads *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->n_layer = L;
    h->n_embd = D;
    h->n_vocab = V;
    h->A = calloc((size_t)L + 1, sizeof *h->A);
    h->b = calloc((size_t)L + 1, sizeof *h->b);
    h->store = calloc((size_t)L * ((size_t)D * D + D), sizeof(float));
    if (!h->A || !h->b || !h->store) {
        sd_exit_heads_free(h);
        return NULL;
    }
    return h;
}

float *exit_heads_A(sd_exit_heads *h, int d) { return h->store + (size_t)(d - 1) * ((size_t)h->n_embd * h->n_embd + h->n_embd); }

sd_exit_heads *exit_heads_new(const sd_model *m) {
    int L = m->hp.n_layer, D = m->hp.n_embd;
    sd_exit_heads *h = alloc_heads(L, D, m->hp.n_vocab);
    if (!h) return NULL;
    h->model_check = exit_heads_model_check(m);
    for (int d = 1; d < L; d++) {
        float *A = exit_heads_A(h, d);
        for (int i = 0; i < D; i++) A[(size_t)i * D + i] = 1.0f;
        h->b[d] = A + (size_t)D * D;
    }
    return h;
}

void exit_heads_set_present(sd_exit_heads *h, int d) {
    int D = h->n_embd;
    h->A[d] = (tensor){GGML_F32, D, D, (size_t)D * sizeof(float), exit_heads_A(h, d)};
}

void sd_exit_heads_free(sd_exit_heads *h) {
    if (!h) return;
    free(h->A);
    free(h->b);
    free(h->store);
    free(h);
}

int sd_exit_heads_depths(const sd_exit_heads *h, int *depths, int cap) {
    int n = 0;
    for (int d = 1; h && d < h->n_layer; d++)
        if (exit_heads_has(h, d)) {
            if (n < cap) depths[n] = d;
            n++;
        }
    return n;
}

typedef struct save_ctx {
    const sd_exit_heads *h;
    int *depth_of; /* tensor index -> depth */
} save_ctx;

static void save_row(void *user, int ti, int64_t row, float *out) {
    save_ctx *s = user;
    const sd_exit_heads *h = s->h;
    int d = s->depth_of[ti];
    int D = h->n_embd;
    if (ti % 2 == 0) memcpy(out, (const float *)h->A[d].data + (size_t)row * D, (size_t)D * sizeof *out);
    else memcpy(out, h->b[d], (size_t)D * sizeof *out);
}

sd_status exit_heads_save(const sd_exit_heads *h, const char *path, sd_error *err) {
    gguf_writer *w = gguf_writer_new();
    int *depth_of = calloc((size_t)2 * h->n_layer + 2, sizeof *depth_of);
    if (!w || !depth_of) {
        gguf_writer_free(w);
        free(depth_of);
        return err_set(err, SD_ERR_NOMEM, "out of memory");
    }
    gguf_writer_str(w, "general.architecture", "specdec-exit-heads");
    gguf_writer_u32(w, "specdec.exit_heads.n_embd", (uint32_t)h->n_embd);
    gguf_writer_u32(w, "specdec.exit_heads.n_layer", (uint32_t)h->n_layer);
    gguf_writer_u32(w, "specdec.exit_heads.n_vocab", (uint32_t)h->n_vocab);
    gguf_writer_u32(w, "specdec.exit_heads.model_check", h->model_check);
    int nt = 0;
    for (int d = 1; d < h->n_layer; d++) {
        if (!exit_heads_has(h, d)) continue;
        char name[64];
        int64_t ne2[2] = {h->n_embd, h->n_embd}, ne1[1] = {h->n_embd};
        snprintf(name, sizeof name, "exit.%d.weight", d);
        gguf_writer_tensor(w, name, GGML_F32, 2, ne2);
        depth_of[nt++] = d;
        snprintf(name, sizeof name, "exit.%d.bias", d);
        gguf_writer_tensor(w, name, GGML_F32, 1, ne1);
        depth_of[nt++] = d;
    }
    save_ctx sc = {h, depth_of};
    sd_status st = gguf_writer_write(w, path, save_row, &sc, NULL, err);
    gguf_writer_free(w);
    free(depth_of);
    return st;
}

sd_status sd_exit_heads_load(const sd_model *m, const char *path, sd_exit_heads **out, sd_error *err) {
    *out = NULL;
    gguf_file f;
    sd_status st = gguf_open(&f, path, err);
    if (st) return st;
    gguf_str arch;
    int64_t D = 0, L = 0, V = 0, chk = 0;
    if (!gguf_get_str(&f, "general.architecture", &arch, NULL) || !gguf_str_eq(arch, "specdec-exit-heads") ||
        !gguf_get_int(&f, "specdec.exit_heads.n_embd", &D, NULL) || !gguf_get_int(&f, "specdec.exit_heads.n_layer", &L, NULL) ||
        !gguf_get_int(&f, "specdec.exit_heads.n_vocab", &V, NULL) ||
        !gguf_get_int(&f, "specdec.exit_heads.model_check", &chk, NULL)) {
        gguf_close(&f);
        return err_set(err, SD_ERR_FORMAT, "%s: not an exit-heads file (made by `specdec train exit-heads`)", path);
    }
    if (D != m->hp.n_embd || L != m->hp.n_layer || V != m->hp.n_vocab || (uint32_t)chk != exit_heads_model_check(m)) {
        gguf_close(&f);
        return err_set(err, SD_ERR_ARG,
                       "%s: exit heads for another model (heads: dim %lld, %lld layers, vocab %lld; model: dim %d, %d layers, "
                       "vocab %d%s)",
                       path, (long long)D, (long long)L, (long long)V, m->hp.n_embd, m->hp.n_layer, m->hp.n_vocab,
                       D == m->hp.n_embd && L == m->hp.n_layer && V == m->hp.n_vocab ? ", other weights" : "");
    }
    sd_exit_heads *h = exit_heads_new(m);
    if (!h) {
        gguf_close(&f);
        return err_set(err, SD_ERR_NOMEM, "out of memory");
    }
    int found = 0;
    for (int d = 1; d < L; d++) {
        char nw[64], nb[64];
        snprintf(nw, sizeof nw, "exit.%d.weight", d);
        snprintf(nb, sizeof nb, "exit.%d.bias", d);
        const gguf_tensor *tw = gguf_find_tensor(&f, nw), *tb = gguf_find_tensor(&f, nb);
        if (!tw && !tb) continue;
        if (!tw || !tb || tw->type != GGML_F32 || tb->type != GGML_F32 || tw->n_dims != 2 || tw->ne[0] != D ||
            tw->ne[1] != D || tb->n_dims != 1 || tb->ne[0] != D) {
            sd_exit_heads_free(h);
            gguf_close(&f);
            return err_set(err, SD_ERR_FORMAT, "%s: head for depth %d has the wrong shape or type", path, d);
        }
        exit_heads_set_present(h, d);
        memcpy((void *)h->A[d].data, tw->data, (size_t)D * D * sizeof(float));
        memcpy(h->b[d], tb->data, (size_t)D * sizeof(float));
        found++;
    }
    gguf_close(&f);
    if (!found) {
        sd_exit_heads_free(h);
        return err_set(err, SD_ERR_FORMAT, "%s: holds no exit heads", path);
    }
    *out = h;
    return SD_OK;
}

sd_status sd_exit_heads_save(const sd_exit_heads *h, const char *path, sd_error *err) {
    if (!h || !path) return err_set(err, SD_ERR_ARG, "sd_exit_heads_save: NULL argument");
    return exit_heads_save(h, path, err);
}
