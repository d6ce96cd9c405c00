/* gen: seeded random-weight GGUF models of real shapes (sd_model_generate). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf.h"
#include "io/gguf_write.h"
#include "model/wmix.h"
#include "sample/rng.h"
#include "tok/tok.h"
#include "util/err.h"

typedef struct gen_shape {
    const char *name;
    int dim, n_layer, n_head, n_head_kv, n_ff, n_ctx;
} gen_shape;

static const gen_shape SHAPES[] = {
    {"test-tiny", 64, 2, 4, 2, 128, 512},
    {"test-256", 256, 2, 4, 2, 512, 512}, /* rows of whole 256-blocks: every matrix takes a K-quant type */
    {"llama-68m", 768, 2, 12, 12, 3072, 2048},
    {"llama-160m", 768, 12, 12, 12, 3072, 2048},
    {"tinyllama-1.1b", 2048, 22, 32, 4, 5632, 2048},
    {"llama2-7b", 4096, 32, 32, 32, 11008, 4096},
};
static const char *const SHAPE_NAMES[] = {"test-tiny", "test-256", "llama-68m", "llama-160m", "tinyllama-1.1b", "llama2-7b", NULL};

const char *const *sd_gen_model_shapes(void) { return SHAPE_NAMES; }

typedef struct gen_state {
    uint64_t seed;
    float *scale;     /* [n_tensors] uniform half-width per tensor; 0 = constant 1 (norm weights) */
    int64_t *row_len; /* [n_tensors] */
    const sd_gen_model_params *p;
} gen_state;

/* Row `row` of tensor ti: its own RNG stream, so any row can be regenerated alone. */
static void gen_fill(void *user, int ti, int64_t row, float *out) {
    gen_state *g = user;
    rng r;
    rng_seed(&r, g->seed ^ ((uint64_t)ti << 40) ^ ((uint64_t)row * 0x9e3779b97f4a7c15ull));
    float a = g->scale[ti];
    for (int64_t i = 0; i < g->row_len[ti]; i++) out[i] = a == 0 ? 1.0f : (float)(rng_uniform(&r) * 2.0 - 1.0) * a;
}

static void gen_progress(void *user, uint64_t done, uint64_t total) {
    gen_state *g = user;
    if (g->p->progress) g->p->progress(g->p->user, done, total);
}

sd_status sd_model_generate(const sd_gen_model_params *p, const char *out_path, sd_error *err) {
    if (!p || !out_path || !p->shape || !p->type || !p->vocab_path)
        return err_set(err, SD_ERR_ARG, "sd_model_generate: shape, type, vocab path and output path are required");
    const gen_shape *sh = NULL;
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++)
        if (!strcmp(SHAPES[i].name, p->shape)) sh = &SHAPES[i];
    if (!sh)
        return err_set(err, SD_ERR_ARG, "unknown shape '%s' (test-tiny, test-256, llama-68m, llama-160m, tinyllama-1.1b, llama2-7b)",
                       p->shape);
    wmix mix;
    if (!wmix_from_name(p->type, &mix))
        return err_set(err, SD_ERR_ARG, "unknown weight type '%s' (%s)", p->type, wmix_names());
    gguf_file vf;
    sd_status st = gguf_open(&vf, p->vocab_path, err);
    if (st) return st;
    /* the tokenizer is built exactly as a model load will build it from the copied keys: a vocabulary that would
     * make an unloadable model is refused before anything is written */
    tokenizer *vt = NULL;
    st = tok_from_gguf(&vf, &vt, err);
    if (st) {
        err_prefix(err, "%s: no usable tokenizer to copy: ", p->vocab_path);
        gguf_close(&vf);
        return st;
    }
    int64_t V = vt->n_vocab;
    tok_free(vt);
    gguf_writer *w = gguf_writer_new();
    if (!w) {
        gguf_close(&vf);
        return err_set(err, SD_ERR_NOMEM, "out of memory");
    }
    gguf_writer_str(w, "general.architecture", "llama");
    char name[96];
    snprintf(name, sizeof name, "specdec random %s %s seed %llu", sh->name, p->type, (unsigned long long)p->seed);
    gguf_writer_str(w, "general.name", name);
    gguf_writer_u32(w, "llama.context_length", (uint32_t)sh->n_ctx);
    gguf_writer_u32(w, "llama.embedding_length", (uint32_t)sh->dim);
    gguf_writer_u32(w, "llama.block_count", (uint32_t)sh->n_layer);
    gguf_writer_u32(w, "llama.feed_forward_length", (uint32_t)sh->n_ff);
    gguf_writer_u32(w, "llama.attention.head_count", (uint32_t)sh->n_head);
    gguf_writer_u32(w, "llama.attention.head_count_kv", (uint32_t)sh->n_head_kv);
    gguf_writer_u32(w, "llama.rope.dimension_count", (uint32_t)(sh->dim / sh->n_head));
    gguf_writer_f32(w, "llama.rope.freq_base", 10000.0f);
    gguf_writer_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    for (uint64_t i = 0; i < vf.n_kv; i++)
        if (!strncmp(vf.kv[i].key, "tokenizer.", 10)) gguf_writer_copy_kv(w, &vf.kv[i]);
    /* tensors */
    int n_t = 3 + 9 * sh->n_layer;
    gen_state g = {p->seed, calloc((size_t)n_t, sizeof(float)), calloc((size_t)n_t, sizeof(int64_t)), p};
    int ti = 0;
    const int64_t E = sh->dim, KV = (int64_t)sh->dim / sh->n_head * sh->n_head_kv, F = sh->n_ff;
#define MAT(nm, cols, rows, sc)                                                                                   \
    do {                                                                                                          \
        int64_t ne[2] = {(cols), (rows)};                                                                         \
        gguf_writer_tensor(w, nm, wtype_fit(wmix_type(&mix, nm, sh->n_layer), (cols)), 2, ne);                                                \
        if (g.scale && g.row_len) g.scale[ti] = (sc), g.row_len[ti] = (cols);                                                                        \
        ti++;                                                                                                     \
    } while (0)
#define VEC(nm, n)                                                                                                \
    do {                                                                                                          \
        int64_t ne[1] = {(n)};                                                                                    \
        gguf_writer_tensor(w, nm, GGML_F32, 1, ne);                                                               \
        if (g.scale && g.row_len) g.scale[ti] = 0, g.row_len[ti] = (n);                                                                           \
        ti++;                                                                                                     \
    } while (0)
    float s_in = 1.7f / sqrtf((float)E), s_ff = 1.7f / sqrtf((float)F);
    MAT("token_embd.weight", E, V, 1.0f);
    VEC("output_norm.weight", E);
    MAT("output.weight", E, V, s_in);
    for (int l = 0; l < sh->n_layer; l++) {
        char nm[64];
#define N(s) (snprintf(nm, sizeof nm, "blk.%d." s, l), nm)
        VEC(N("attn_norm.weight"), E);
        MAT(N("attn_q.weight"), E, E, s_in);
        MAT(N("attn_k.weight"), E, KV, s_in);
        MAT(N("attn_v.weight"), E, KV, s_in);
        MAT(N("attn_output.weight"), E, E, s_in);
        VEC(N("ffn_norm.weight"), E);
        MAT(N("ffn_gate.weight"), E, F, s_in);
        MAT(N("ffn_up.weight"), E, F, s_in);
        MAT(N("ffn_down.weight"), F, E, s_ff);
#undef N
    }
#undef MAT
#undef VEC
    if (!g.scale || !g.row_len)
        st = err_set(err, SD_ERR_NOMEM, "out of memory");
    else
        st = gguf_writer_write(w, out_path, gen_fill, &g, gen_progress, err);
    free(g.row_len);
    free(g.scale);
    gguf_writer_free(w);
    gguf_close(&vf);
    return st;
}
