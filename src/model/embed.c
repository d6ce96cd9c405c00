/* embed: a wide model that computes exactly a small trained model's function (sd_model_embed).
 *
 * The small model (dim D0, H0 query heads over K0 KV heads of size hd, FFN F0) is written into a model of dim D,
 * H = D / hd heads, K KV heads (H / K = H0 / K0) and FFN F >= F0, same layers and vocabulary:
 *   - the residual stream keeps the small model's D0 dims first; the extra D - D0 dims stay exactly 0 in every layer
 *     (nothing ever writes into them: their embedding columns and the rows of attn_output / ffn_down that write
 *     them are 0);
 *   - query heads 0..H0-1 and KV heads 0..K0-1 are the small model's (head h reads KV head h / (H0/K0) in both),
 *     FFN units 0..F0-1 are the small model's; the extra heads and units compute seeded random values that nothing
 *     reads (their columns in attn_output / ffn_down are 0);
 *   - RMSNorm weights of the real dims are scaled by sqrt(D0/D) and epsilon by D0/D: with the extra dims at 0,
 *     mean(x^2) over D is D0/D of the mean over D0, so the normalised real dims are unchanged;
 *   - weights that only read the zero dims (extra columns of q/k/v/gate/up/output, norm weights of the extra dims)
 *     or only feed extra heads/units are seeded random values of the small tensor's RMS: they cost what a real
 *     model's weights cost and change nothing.
 * A matrix whose rows are not whole blocks of the asked type takes q8_0 or f16 (wtype_fit, as gen-model does).
 * The output is written streaming (memory O(row) beyond the small model). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf.h"
#include "io/gguf_write.h"
#include "model/wmix.h"
#include "model/model.h"
#include "sample/rng.h"
#include "util/err.h"

typedef enum embed_kind {
    EMB_TOKENS, /* token_embd [V][D]: small rows, extra dims 0 */
    EMB_NORM,   /* RMSNorm weight [D]: small * sqrt(D0/D), extra dims random */
    EMB_READ,   /* reads the stream: [R][D]; rows < R0 and cols < D0 small, everything else random */
    EMB_WRITE,  /* writes the stream: [D][C]; rows < D0 and cols < C0 small, everything else 0 */
    EMB_BIAS,   /* bias [R]: first R0 small, rest random */
} embed_kind;

typedef struct embed_tensor {
    embed_kind kind;
    const tensor *small;  /* matrices */
    const float *vec;     /* norms and biases: [small length] */
    int64_t rows, cols;   /* wide shape (vectors: rows 1) */
    int64_t rows0, cols0; /* small shape */
    float rand_scale;     /* half-width of the uniform random values */
} embed_tensor;

typedef struct embed_state {
    const sd_model *small;
    embed_tensor *t; /* [n_t] in declaration order */
    int n_t;
    float norm_scale; /* sqrt(D0/D) */
    float *row0;      /* [max small cols] scratch */
    uint64_t seed;
    const sd_embed_params *p;
} embed_state;

static void embed_fill(void *user, int ti, int64_t row, float *out) {
    embed_state *g = user;
    const embed_tensor *t = &g->t[ti];
    if (t->kind != EMB_TOKENS && t->kind != EMB_WRITE) { /* the kinds with random entries */
        rng r;
        rng_seed(&r, g->seed ^ ((uint64_t)ti << 40) ^ ((uint64_t)row * 0x9e3779b97f4a7c15ull));
        for (int64_t c = 0; c < t->cols; c++) out[c] = (float)(rng_uniform(&r) * 2.0 - 1.0) * t->rand_scale;
    }
    switch (t->kind) {
    case EMB_TOKENS:
        tensor_get_row(t->small, row, g->row0);
        memcpy(out, g->row0, (size_t)t->cols0 * sizeof *out);
        memset(out + t->cols0, 0, (size_t)(t->cols - t->cols0) * sizeof *out);
        break;
    case EMB_NORM:
        for (int64_t c = 0; c < t->cols0; c++) out[c] = t->vec[c] * g->norm_scale;
        break;
    case EMB_BIAS:
        memcpy(out, t->vec, (size_t)t->cols0 * sizeof *out);
        break;
    case EMB_READ:
        if (row < t->rows0) {
            tensor_get_row(t->small, row, g->row0);
            memcpy(out, g->row0, (size_t)t->cols0 * sizeof *out);
        }
        break;
    case EMB_WRITE:
        memset(out, 0, (size_t)t->cols * sizeof *out);
        if (row < t->rows0) {
            tensor_get_row(t->small, row, g->row0);
            memcpy(out, g->row0, (size_t)t->cols0 * sizeof *out);
        }
        break;
    }
}

static void embed_progress(void *user, uint64_t done, uint64_t total) {
    embed_state *g = user;
    if (g->p->progress) g->p->progress(g->p->user, done, total);
}

/* Root mean square of a small matrix (the random values' scale: uniform +-a has RMS a / sqrt(3)). */
static float tensor_rms(const tensor *t, float *row) {
    double s = 0;
    for (int64_t r = 0; r < t->rows; r++) {
        tensor_get_row(t, r, row);
        for (int64_t c = 0; c < t->cols; c++) s += (double)row[c] * row[c];
    }
    double n = (double)t->rows * (double)t->cols;
    return n > 0 ? (float)sqrt(s / n) : 0.0f;
}

/* Metadata keys the wide model sets itself instead of copying (the rest of the small model's is copied). */
static bool embed_key_replaced(const char *key, const char *arch) {
    static const char *const general[] = {"general.name", "general.alignment", "general.file_type",
                                          "general.quantization_version"};
    for (size_t i = 0; i < sizeof general / sizeof general[0]; i++)
        if (!strcmp(key, general[i])) return true;
    static const char *const own[] = {"embedding_length",        "feed_forward_length",
                                      "attention.head_count",    "attention.head_count_kv",
                                      "attention.layer_norm_rms_epsilon", "context_length"};
    size_t al = strlen(arch);
    if (strncmp(key, arch, al) || key[al] != '.') return false;
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (!strcmp(key + al + 1, own[i])) return true;
    return false;
}

/* Checks the wide shape against the small one and fills in the defaults (0 = derived). */
static sd_status embed_shape(const hparams *h0, const sd_embed_params *p, int *H, int *K, int *F, sd_error *err) {
    int D = p->dim, hd = h0->head_dim, g0 = h0->n_head / h0->n_head_kv;
    if (h0->n_head * hd != h0->n_embd)
        return err_set(err, SD_ERR_ARG, "--embed: the small model's heads do not span its dim (%d heads x %d != %d)",
                       h0->n_head, hd, h0->n_embd);
    if (D <= h0->n_embd)
        return err_set(err, SD_ERR_ARG, "--dim %d must be larger than the small model's dim %d", D, h0->n_embd);
    if (D % hd)
        return err_set(err, SD_ERR_ARG, "--dim %d must be a multiple of the head size %d (the head size is kept)", D,
                       hd);
    *H = p->n_head ? p->n_head : D / hd;
    if (*H * hd != D)
        return err_set(err, SD_ERR_ARG, "--heads %d x head size %d != --dim %d (the head size %d is kept)", *H, hd, D,
                       hd);
    *K = p->n_head_kv ? p->n_head_kv : *H / g0;
    if (*K <= 0 || *H % *K || *H / *K != g0)
        return err_set(err, SD_ERR_ARG,
                       "--kv-heads %d: the small model has %d query heads per KV head; %d heads need %d KV heads (%s)",
                       *K, g0, *H, *H % g0 ? 0 : *H / g0,
                       *H % g0 ? "choose --dim so that the head count is a multiple of the group size" : "keep the ratio");
    *F = p->n_ff ? p->n_ff : (int)(((int64_t)h0->n_ff * D / h0->n_embd + 31) / 32 * 32);
    if (*F < h0->n_ff) return err_set(err, SD_ERR_ARG, "--ffn %d is smaller than the small model's %d", *F, h0->n_ff);
    return SD_OK;
}

sd_status sd_model_embed(const sd_embed_params *p, const char *out_path, sd_error *err) {
    if (!p || !out_path || !p->small_path || !p->type)
        return err_set(err, SD_ERR_ARG, "sd_model_embed: small model path, type and output path are required");
    wmix mix;
    if (!wmix_from_name(p->type, &mix))
        return err_set(err, SD_ERR_ARG, "unknown weight type '%s' (%s)", p->type, wmix_names());
    if (p->dim <= 0 || p->n_head < 0 || p->n_head_kv < 0 || p->n_ff < 0 || p->n_ctx < 0)
        return err_set(err, SD_ERR_ARG, "--dim must be positive; --heads, --kv-heads, --ffn and --ctx not negative");
    sd_model *sm;
    sd_status st = sd_model_load(p->small_path, NULL, &sm, err);
    if (st) return st;
    if (!sm->gguf.kv) {
        sd_model_free(sm);
        return err_set(err, SD_ERR_ARG, "%s: --embed needs a GGUF model (its metadata is copied)", p->small_path);
    }
    const hparams *h0 = &sm->hp;
    int H = 0, K = 0, F = 0;
    if ((st = embed_shape(h0, p, &H, &K, &F, err))) {
        sd_model_free(sm);
        return st;
    }
    const int64_t D = p->dim, D0 = h0->n_embd, hd = h0->head_dim, V = h0->n_vocab;
    const char *arch = sm->arch->name;

    gguf_writer *w = gguf_writer_new();
    int n_t = 3 + (9 + (sm->arch->qkv_bias ? 3 : 0)) * h0->n_layer;
    embed_state g = {sm, calloc((size_t)n_t, sizeof(embed_tensor)), 0, sqrtf((float)D0 / (float)D),
                     malloc((size_t)(h0->n_ff > D0 ? h0->n_ff : D0) * sizeof(float)), p->seed, p};
    if (!w || !g.t || !g.row0) {
        st = err_set(err, SD_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (uint64_t i = 0; i < sm->gguf.n_kv; i++)
        if (!embed_key_replaced(sm->gguf.kv[i].key, arch)) gguf_writer_copy_kv(w, &sm->gguf.kv[i]);
    char key[96], name[160];
    const char *base = strrchr(p->small_path, '/');
    snprintf(name, sizeof name, "%s widened to dim %d", base ? base + 1 : p->small_path, p->dim);
    gguf_writer_str(w, "general.name", name);
#define KEY(s) (snprintf(key, sizeof key, "%s." s, arch), key)
    gguf_writer_u32(w, KEY("context_length"), (uint32_t)(p->n_ctx ? p->n_ctx : h0->n_ctx_train));
    gguf_writer_u32(w, KEY("embedding_length"), (uint32_t)D);
    gguf_writer_u32(w, KEY("feed_forward_length"), (uint32_t)F);
    gguf_writer_u32(w, KEY("attention.head_count"), (uint32_t)H);
    gguf_writer_u32(w, KEY("attention.head_count_kv"), (uint32_t)K);
    gguf_writer_f32(w, KEY("attention.layer_norm_rms_epsilon"), h0->norm_eps * (float)D0 / (float)D);
#undef KEY

    /* tensors, each with what its rows are made of */
    const float sqrt3 = 1.7320508f;
#define ADD(nm, kind_, small_, vec_, rows_, cols_, rows0_, cols0_)                                                     \
    do {                                                                                                           \
        embed_tensor *e = &g.t[g.n_t++];                                                                           \
        *e = (embed_tensor){kind_, small_, vec_, rows_, cols_, rows0_, cols0_, 0};                                 \
        bool mat = (rows_) > 1 || (kind_) == EMB_TOKENS;                                                            \
        int64_t ne[2] = {(cols_), (rows_)};                                                                        \
        gguf_writer_tensor(w, nm, mat ? wtype_fit(wmix_type(&mix, nm, h0->n_layer), cols_) : GGML_F32, mat ? 2 : 1, ne);                                       \
        e->rand_scale = mat ? tensor_rms(small_, g.row0) * sqrt3 : 1.0f;                                            \
    } while (0)
    ADD("token_embd.weight", EMB_TOKENS, &sm->tok_embd, NULL, V, D, V, D0);
    ADD("output_norm.weight", EMB_NORM, NULL, sm->out_norm, 1, D, 1, D0);
    ADD("output.weight", EMB_READ, &sm->output, NULL, V, D, V, D0);
    const int64_t Q = (int64_t)H * hd, Q0 = (int64_t)h0->n_head * hd, KV = (int64_t)K * hd,
                  KV0 = (int64_t)h0->n_head_kv * hd;
    for (int l = 0; l < h0->n_layer; l++) {
        const layer_w *lw = &sm->layers[l];
        char nm[64];
#define N(s) (snprintf(nm, sizeof nm, "blk.%d." s, l), nm)
        ADD(N("attn_norm.weight"), EMB_NORM, NULL, lw->attn_norm, 1, D, 1, D0);
        ADD(N("attn_q.weight"), EMB_READ, &lw->wq, NULL, Q, D, Q0, D0);
        ADD(N("attn_k.weight"), EMB_READ, &lw->wk, NULL, KV, D, KV0, D0);
        ADD(N("attn_v.weight"), EMB_READ, &lw->wv, NULL, KV, D, KV0, D0);
        if (sm->arch->qkv_bias) {
            ADD(N("attn_q.bias"), EMB_BIAS, NULL, lw->bq, 1, Q, 1, Q0);
            ADD(N("attn_k.bias"), EMB_BIAS, NULL, lw->bk, 1, KV, 1, KV0);
            ADD(N("attn_v.bias"), EMB_BIAS, NULL, lw->bv, 1, KV, 1, KV0);
        }
        ADD(N("attn_output.weight"), EMB_WRITE, &lw->wo, NULL, D, Q, D0, Q0);
        ADD(N("ffn_norm.weight"), EMB_NORM, NULL, lw->ffn_norm, 1, D, 1, D0);
        ADD(N("ffn_gate.weight"), EMB_READ, &lw->w_gate, NULL, F, D, h0->n_ff, D0);
        ADD(N("ffn_up.weight"), EMB_READ, &lw->w_up, NULL, F, D, h0->n_ff, D0);
        ADD(N("ffn_down.weight"), EMB_WRITE, &lw->w_down, NULL, D, F, D0, h0->n_ff);
#undef N
    }
#undef ADD
    st = gguf_writer_write(w, out_path, embed_fill, &g, embed_progress, err);
done:
    free(g.row0);
    free(g.t);
    gguf_writer_free(w);
    sd_model_free(sm);
    return st;
}
