#include "model/model.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "io/gguf_write.h"
#include "io/llama2c.h"
#include "util/err.h"
#include "util/fp16.h"

void tensor_get_row(const tensor *t, int64_t r, float *out) {
    const wtype_info *ti = wtype_get(t->type);
    SD_ASSERT(ti && "tensor type validated at load");
    ti->to_float((const unsigned char *)t->data + (size_t)r * t->row_bytes, out, t->cols);
}

sd_model_params sd_model_default_params(void) {
    sd_model_params p = {0};
    return p;
}

void sd_model_free(sd_model *m) {
    if (!m) return;
    tok_free(m->tok);
    free(m->layers);
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    free(m->path);
    gguf_close(&m->gguf);
    mapfile_close(&m->bin);
    free(m);
}

/* ------------------------------------------------------------------ GGUF */

typedef struct loader {
    sd_model *m;
    const gguf_file *f;
    sd_error *err;
} loader;

/* Finds a tensor and checks its shape (ne0, ne1; ne1 = 0 for a vector). */
static sd_status get_tensor(loader *L, const char *name, int64_t ne0, int64_t ne1, bool required,
                            const gguf_tensor **out) {
    const gguf_tensor *t = gguf_find_tensor(L->f, name);
    *out = t;
    if (!t) {
        if (!required) return SD_OK;
        return err_set(L->err, SD_ERR_FORMAT, "missing tensor '%s' (architecture %s)", name, L->m->arch->name);
    }
    bool ok = ne1 == 0 ? (t->n_dims == 1 && t->ne[0] == ne0)
                       : (t->n_dims == 2 && t->ne[0] == ne0 && t->ne[1] == ne1);
    if (!ok)
        return err_set(L->err, SD_ERR_FORMAT,
                       "tensor '%s' has shape [%" PRId64 ", %" PRId64 "] (%u dims), expected [%" PRId64 ", %" PRId64 "]",
                       name, t->ne[0], t->ne[1], t->n_dims, ne0, ne1 ? ne1 : 1);
    L->m->weight_bytes += t->nbytes;
    return SD_OK;
}

static sd_status get_matrix(loader *L, const char *name, int64_t cols, int64_t rows, tensor *out) {
    const gguf_tensor *t;
    sd_status st = get_tensor(L, name, cols, rows, true, &t);
    if (st) return st;
    out->type = t->type;
    out->rows = rows;
    out->cols = cols;
    out->row_bytes = ggml_row_bytes(t->type, cols);
    out->data = t->data;
    return SD_OK;
}

/* A vector of floats: F32 in place, other types converted into an owned copy. */
static sd_status get_vector(loader *L, const char *name, int64_t n, bool required, const float **out) {
    const gguf_tensor *t;
    *out = NULL;
    sd_status st = get_tensor(L, name, n, 0, required, &t);
    if (st || !t) return st;
    if (t->type == GGML_F32) {
        *out = t->data;
        return SD_OK;
    }
    float *buf = malloc((size_t)n * sizeof *buf);
    float **ow = realloc(L->m->owned, (size_t)(L->m->n_owned + 1) * sizeof *ow);
    if (!buf || !ow) {
        free(buf);
        if (ow) L->m->owned = ow;
        return err_set(L->err, SD_ERR_NOMEM, "out of memory converting '%s'", name);
    }
    L->m->owned = ow;
    L->m->owned[L->m->n_owned++] = buf;
    tensor tmp = {t->type, 1, n, ggml_row_bytes(t->type, n), t->data};
    tensor_get_row(&tmp, 0, buf);
    *out = buf;
    return SD_OK;
}

static sd_status need_int(loader *L, const char *key, int64_t lo, int64_t hi, bool required, int64_t dflt, int *out) {
    int64_t v;
    bool bad = false;
    if (!gguf_get_int(L->f, key, &v, &bad)) {
        if (bad) return err_set(L->err, SD_ERR_FORMAT, "metadata '%s' has the wrong type (an integer is expected)", key);
        if (required) return err_set(L->err, SD_ERR_FORMAT, "missing metadata '%s'", key);
        v = dflt;
    }
    if (v < lo || v > hi)
        return err_set(L->err, SD_ERR_FORMAT, "metadata '%s' = %" PRId64 " is out of range [%" PRId64 ", %" PRId64 "]",
                       key, v, lo, hi);
    *out = (int)v;
    return SD_OK;
}

/* The one reader for float hyperparameters: the value (f32, f64 or an integer) must be finite and in [lo, hi]
 * (bounds within float range, so the conversion is exact in range and never overflows); missing -> dflt, or an
 * error when required. lo_open excludes lo itself (for "> 0" and "> 1"). */
static sd_status need_float(loader *L, const char *key, double lo, bool lo_open, double hi, double dflt, float *out) {
    double v;
    bool bad = false;
    if (!gguf_get_float(L->f, key, &v, &bad)) {
        if (bad) return err_set(L->err, SD_ERR_FORMAT, "metadata '%s' has the wrong type (a number is expected)", key);
        v = dflt;
    }
    if (!isfinite(v) || v < lo || (lo_open && !((float)v > (float)lo)) || v > hi) /* (and no underflow to lo) */
        return err_set(L->err, SD_ERR_FORMAT, "metadata '%s' = %g is out of range %s%g, %g]", key, v, lo_open ? "(" : "[",
                       lo, hi);
    *out = (float)v;
    return SD_OK;
}

static sd_status load_gguf(sd_model *m, sd_error *err) {
    const gguf_file *f = &m->gguf;
    loader L = {m, f, err};
    gguf_str arch;
    bool bad = false;
    if (!gguf_get_str(f, "general.architecture", &arch, &bad))
        return err_set(err, SD_ERR_FORMAT, "missing metadata 'general.architecture'%s", bad ? " (wrong type)" : "");
    m->arch = arch_find(arch.p, (unsigned long)arch.len);
    if (!m->arch)
        return err_set(err, SD_ERR_UNSUPPORTED, "unknown architecture '%.*s' (supported: %s)",
                       (int)(arch.len > 64 ? 64 : arch.len), arch.p, arch_list());
    hparams *hp = &m->hp;
    char key[128];
    sd_status st;
#define KEY(s) (snprintf(key, sizeof key, "%s." s, m->arch->name), key)
    if ((st = need_int(&L, KEY("embedding_length"), 1, 1 << 16, true, 0, &hp->n_embd))) return st;
    if ((st = need_int(&L, KEY("block_count"), 1, 1024, true, 0, &hp->n_layer))) return st;
    if ((st = need_int(&L, KEY("feed_forward_length"), 1, 1 << 20, true, 0, &hp->n_ff))) return st;
    if ((st = need_int(&L, KEY("attention.head_count"), 1, 1024, true, 0, &hp->n_head))) return st;
    if ((st = need_int(&L, KEY("attention.head_count_kv"), 1, hp->n_head, false, hp->n_head, &hp->n_head_kv))) return st;
    if ((st = need_int(&L, KEY("context_length"), 1, 1 << 24, false, 2048, &hp->n_ctx_train))) return st;
    if (hp->n_embd % hp->n_head != 0)
        return err_set(err, SD_ERR_FORMAT, "embedding_length %d is not a multiple of head_count %d", hp->n_embd, hp->n_head);
    if (hp->n_head % hp->n_head_kv != 0)
        return err_set(err, SD_ERR_FORMAT, "head_count %d is not a multiple of head_count_kv %d", hp->n_head, hp->n_head_kv);
    hp->head_dim = hp->n_embd / hp->n_head;
    if (hp->head_dim % 2 != 0) return err_set(err, SD_ERR_FORMAT, "head dimension %d is odd", hp->head_dim);
    int rope_dim;
    if ((st = need_int(&L, KEY("rope.dimension_count"), 1, 1 << 16, false, hp->head_dim, &rope_dim))) return st;
    if (rope_dim != hp->head_dim)
        return err_set(err, SD_ERR_UNSUPPORTED, "partial RoPE (rope.dimension_count %d < head dim %d) is not supported",
                       rope_dim, hp->head_dim);
    if ((st = need_float(&L, KEY("rope.freq_base"), 1.0, true, 1e30, m->arch->default_rope_base, &hp->rope_base)))
        return st;
    if ((st = need_float(&L, KEY("attention.layer_norm_rms_epsilon"), 0.0, true, 1.0, 1e-5, &hp->norm_eps))) return st;
    gguf_str rs;
    if (gguf_get_str(f, KEY("rope.scaling.type"), &rs, NULL) && !gguf_str_eq(rs, "none")) {
        float fac = 1.0f;
        if ((st = need_float(&L, KEY("rope.scaling.factor"), 0.0, false, 1e6, 1.0, &fac))) return st;
        if (fac != 1.0f && fac != 0.0f)
            return err_set(err, SD_ERR_UNSUPPORTED, "RoPE scaling '%.*s' (factor %g) is not supported", (int)rs.len,
                           rs.p, fac);
    }
#undef KEY
    if ((st = tok_from_gguf(f, &m->tok, err))) return st;
    hp->n_vocab = m->tok->n_vocab;

    const int E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim;
    if ((st = get_matrix(&L, "token_embd.weight", E, hp->n_vocab, &m->tok_embd))) return st;
    if ((st = get_vector(&L, "output_norm.weight", E, true, &m->out_norm))) return st;
    if (gguf_find_tensor(f, "output.weight")) {
        if ((st = get_matrix(&L, "output.weight", E, hp->n_vocab, &m->output))) return st;
    } else {
        m->output = m->tok_embd; /* tied */
    }
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return err_set(err, SD_ERR_NOMEM, "out of memory");
    char name[96];
#define T(s) (snprintf(name, sizeof name, "blk.%d." s, l), name)
    for (int l = 0; l < hp->n_layer; l++) {
        layer_w *w = &m->layers[l];
        if ((st = get_vector(&L, T("attn_norm.weight"), E, true, &w->attn_norm))) return st;
        if ((st = get_matrix(&L, T("attn_q.weight"), E, Q, &w->wq))) return st;
        if ((st = get_matrix(&L, T("attn_k.weight"), E, KV, &w->wk))) return st;
        if ((st = get_matrix(&L, T("attn_v.weight"), E, KV, &w->wv))) return st;
        if ((st = get_matrix(&L, T("attn_output.weight"), Q, E, &w->wo))) return st;
        if ((st = get_vector(&L, T("attn_q.bias"), Q, m->arch->qkv_bias, &w->bq))) return st;
        if ((st = get_vector(&L, T("attn_k.bias"), KV, m->arch->qkv_bias, &w->bk))) return st;
        if ((st = get_vector(&L, T("attn_v.bias"), KV, m->arch->qkv_bias, &w->bv))) return st;
        if ((st = get_vector(&L, T("ffn_norm.weight"), E, true, &w->ffn_norm))) return st;
        if ((st = get_matrix(&L, T("ffn_gate.weight"), E, hp->n_ff, &w->w_gate))) return st;
        if ((st = get_matrix(&L, T("ffn_up.weight"), E, hp->n_ff, &w->w_up))) return st;
        if ((st = get_matrix(&L, T("ffn_down.weight"), hp->n_ff, E, &w->w_down))) return st;
    }
#undef T
    m->main_type = m->layers[0].wq.type;
    return SD_OK;
}

/* ------------------------------------------------------------------ llama2.c */

static sd_status load_llama2c(sd_model *m, const char *path, const sd_model_params *p, sd_error *err) {
    llama2c_weights lw;
    sd_status st = llama2c_parse(&lw, m->bin.data, m->bin.size, err);
    if (st) return err_prefix(err, "%s: ", path), st;
    m->arch = arch_find("llama", 5);
    hparams *hp = &m->hp;
    hp->n_vocab = lw.n_vocab;
    hp->n_embd = lw.dim;
    hp->n_layer = lw.n_layers;
    hp->n_head = lw.n_heads;
    hp->n_head_kv = lw.n_kv_heads;
    hp->head_dim = lw.dim / lw.n_heads;
    hp->n_ff = lw.hidden_dim;
    hp->n_ctx_train = lw.seq_len;
    hp->rope_base = 10000.0f;
    hp->norm_eps = 1e-5f;
    const int E = hp->n_embd, Q = E, KV = hp->n_head_kv * hp->head_dim, F = hp->n_ff;
#define MAT(dst, ptr, r, c) (dst) = (tensor){GGML_F32, (r), (c), (size_t)(c) * 4, (ptr)}
    MAT(m->tok_embd, lw.token_embd, hp->n_vocab, E);
    MAT(m->output, lw.wcls, hp->n_vocab, E);
    m->out_norm = lw.rms_final;
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return err_set(err, SD_ERR_NOMEM, "out of memory");
    for (int l = 0; l < hp->n_layer; l++) {
        layer_w *w = &m->layers[l];
        w->attn_norm = lw.rms_att + (size_t)l * E;
        w->ffn_norm = lw.rms_ffn + (size_t)l * E;
        MAT(w->wq, lw.wq + (size_t)l * Q * E, Q, E);
        MAT(w->wk, lw.wk + (size_t)l * KV * E, KV, E);
        MAT(w->wv, lw.wv + (size_t)l * KV * E, KV, E);
        MAT(w->wo, lw.wo + (size_t)l * E * Q, E, Q);
        MAT(w->w_gate, lw.w1 + (size_t)l * F * E, F, E);
        MAT(w->w_down, lw.w2 + (size_t)l * E * F, E, F);
        MAT(w->w_up, lw.w3 + (size_t)l * F * E, F, E);
    }
#undef MAT
    m->main_type = GGML_F32;
    m->weight_bytes = m->bin.size;
    /* tokenizer: explicit path, else tok<vocab>.bin, else tokenizer.bin beside the model */
    char buf[4096];
    const char *tp = p ? p->tokenizer_path : NULL;
    if (!tp) {
        const char *slash = strrchr(path, '/');
        int dir = slash ? (int)(slash - path + 1) : 0;
        snprintf(buf, sizeof buf, "%.*stok%d.bin", dir, path, hp->n_vocab);
        FILE *fp = fopen(buf, "rb");
        if (fp) {
            fclose(fp);
        } else {
            snprintf(buf, sizeof buf, "%.*stokenizer.bin", dir, path);
            fp = fopen(buf, "rb");
            if (!fp)
                return err_set(err, SD_ERR_IO,
                               "%s: llama2.c model needs a tokenizer: none of tok%d.bin or tokenizer.bin found beside it "
                               "(use --tokenizer FILE)",
                               path, hp->n_vocab);
            fclose(fp);
        }
        tp = buf;
    }
    return tok_from_llama2c(tp, hp->n_vocab, &m->tok, err);
}

/* Re-encodes every weight matrix as `type` into memory the model owns (row by row through f32). */
static sd_status convert_weights(sd_model *m, const char *type_name, sd_error *err) {
    uint32_t type;
    if (!wtype_from_name(type_name, &type))
        return err_set(err, SD_ERR_ARG, "unknown weight type '%s' to convert to (%s)", type_name, wtype_names());
    int n_mat = 2 + 7 * m->hp.n_layer;
    tensor **mats = malloc((size_t)n_mat * sizeof *mats);
    if (!mats) return err_set(err, SD_ERR_NOMEM, "out of memory");
    int k = 0;
    bool tied = m->output.data == m->tok_embd.data;
    mats[k++] = &m->tok_embd;
    if (!tied) mats[k++] = &m->output;
    for (int l = 0; l < m->hp.n_layer; l++) {
        layer_w *w = &m->layers[l];
        tensor *ts[7] = {&w->wq, &w->wk, &w->wv, &w->wo, &w->w_gate, &w->w_up, &w->w_down};
        for (int i = 0; i < 7; i++) mats[k++] = ts[i];
    }
    sd_status st = SD_OK;
    float *row = malloc((size_t)(m->hp.n_ff > m->hp.n_embd ? m->hp.n_ff : m->hp.n_embd) * sizeof *row);
    for (int i = 0; i < k && !st; i++) {
        tensor *t = mats[i];
        /* rows that are not whole blocks cannot be block-quantized: those matrices take another type (wtype_fit, as
         * llama-quantize falls back) */
        uint32_t ty = wtype_fit(type, t->cols);
        if (t->type == ty) continue;
        size_t rb = ggml_row_bytes(ty, t->cols);
        unsigned char *buf = malloc((size_t)t->rows * rb);
        float **ow = realloc(m->owned, (size_t)(m->n_owned + 1) * sizeof *ow);
        if (ow) m->owned = ow;
        if (!buf || !ow || !row) {
            free(buf);
            st = err_set(err, SD_ERR_NOMEM, "out of memory converting the weights to %s", type_name);
            break;
        }
        m->owned[m->n_owned++] = (float *)(void *)buf;
        for (int64_t r = 0; r < t->rows; r++) {
            tensor_get_row(t, r, row);
            gguf_quantize_row(ty, row, t->cols, buf + (size_t)r * rb);
        }
        t->type = ty;
        t->row_bytes = rb;
        t->data = buf;
    }
    if (tied) m->output = m->tok_embd;
    m->main_type = m->layers[0].wq.type;
    size_t total = 0;
    for (int i = 0; i < k; i++) total += (size_t)mats[i]->rows * mats[i]->row_bytes;
    m->weight_bytes = total;
    free(row);
    free(mats);
    return st;
}

static size_t mat_bytes(const tensor *t) { return (size_t)t->rows * t->row_bytes; }

static uint64_t mat_macs(const tensor *t) { return (uint64_t)t->rows * (uint64_t)t->cols; }

static uint64_t matmul_macs(const sd_model *m) {
    uint64_t n = mat_macs(&m->output);
    for (int l = 0; l < m->hp.n_layer; l++) {
        const layer_w *w = &m->layers[l];
        n += mat_macs(&w->wq) + mat_macs(&w->wk) + mat_macs(&w->wv) + mat_macs(&w->wo) + mat_macs(&w->w_gate) +
             mat_macs(&w->w_up) + mat_macs(&w->w_down);
    }
    return n;
}

static size_t decode_bytes(const sd_model *m) {
    const hparams *hp = &m->hp;
    size_t b = mat_bytes(&m->output) + m->tok_embd.row_bytes + (size_t)hp->n_embd * 4;
    for (int l = 0; l < hp->n_layer; l++) {
        const layer_w *w = &m->layers[l];
        b += mat_bytes(&w->wq) + mat_bytes(&w->wk) + mat_bytes(&w->wv) + mat_bytes(&w->wo) + mat_bytes(&w->w_gate) +
             mat_bytes(&w->w_up) + mat_bytes(&w->w_down) + 2 * (size_t)hp->n_embd * 4;
    }
    return b;
}

sd_status sd_model_load(const char *path, const sd_model_params *params, sd_model **out, sd_error *err) {
    if (!out) return err_set(err, SD_ERR_ARG, "sd_model_load: out is NULL");
    *out = NULL;
    if (!path) return err_set(err, SD_ERR_ARG, "sd_model_load: path is NULL");
    sd_model *m = calloc(1, sizeof *m);
    if (!m) return err_set(err, SD_ERR_NOMEM, "out of memory");
    mapfile mf;
    mapfile_mode mode = {params && params->no_mmap, params && params->mlock};
    sd_status st = mapfile_open(&mf, path, &mode, err);
    if (st) {
        free(m);
        return st;
    }
    if (gguf_is_gguf(mf.data, mf.size)) {
        m->gguf.map = mf;
        st = gguf_parse(&m->gguf, mf.data, mf.size, err);
        m->gguf.map = mf; /* owned by the model from here on, also on failure */
        if (st == SD_OK) {
            st = load_gguf(m, err);
            if (st) err_prefix(err, "%s: ", path);
        } else {
            err_prefix(err, "%s: ", path);
        }
    } else {
        m->bin = mf;
        st = load_llama2c(m, path, params, err);
    }
    if (!st && params && params->convert_type) {
        st = convert_weights(m, params->convert_type, err);
        if (st) err_prefix(err, "%s: ", path);
    }
    if (st) {
        sd_model_free(m);
        return st;
    }
    m->decode_bytes = decode_bytes(m);
    size_t plen = strlen(path) + 1;
    m->path = malloc(plen);
    if (m->path) memcpy(m->path, path, plen);
    if (!m->path) {
        sd_model_free(m);
        return err_set(err, SD_ERR_NOMEM, "out of memory");
    }
    *out = m;
    return SD_OK;
}

void sd_model_get_info(const sd_model *m, sd_model_info *info) {
    memset(info, 0, sizeof *info);
    info->arch = m->arch->name;
    info->weight_type = ggml_type_name(m->main_type);
    info->n_vocab = m->hp.n_vocab;
    info->n_embd = m->hp.n_embd;
    info->n_layer = m->hp.n_layer;
    info->n_head = m->hp.n_head;
    info->n_head_kv = m->hp.n_head_kv;
    info->n_ff = m->hp.n_ff;
    info->n_ctx_train = m->hp.n_ctx_train;
    info->rope_freq_base = m->hp.rope_base;
    info->norm_eps = m->hp.norm_eps;
    info->weight_bytes = m->weight_bytes;
    info->decode_bytes = m->decode_bytes;
    info->matmul_macs = matmul_macs(m);
}

int sd_model_meta_str(const sd_model *m, const char *key, char *buf, int cap) {
    gguf_str v;
    if (!m->gguf.kv || !gguf_get_str(&m->gguf, key, &v, NULL)) return -1;
    if (buf && cap > 0) {
        size_t n = v.len < (uint64_t)cap - 1 ? (size_t)v.len : (size_t)cap - 1;
        memcpy(buf, v.p, n);
        buf[n] = 0;
    }
    return v.len > 0x7fffffff ? 0x7fffffff : (int)v.len;
}
