/* model: hyper-parameters and per-layer weight views of a loaded model (internal layout of sd_model). */
#ifndef SD_MODEL_MODEL_H
#define SD_MODEL_MODEL_H
#include <stddef.h>
#include <stdint.h>

#include "io/gguf.h"
#include "io/mapfile.h"
#include "model/arch.h"
#include "specdec.h"
#include "tok/tok.h"

/* A weight matrix W[rows][cols] in ggml layout (cols = ne0 = input features), stored as `type`. */
typedef struct tensor {
    uint32_t type;
    int64_t rows, cols;
    size_t row_bytes;
    const void *data; /* [rows][row_bytes] */
} tensor;

typedef struct layer_w {
    const float *attn_norm;     /* [n_embd] */
    tensor wq, wk, wv, wo;      /* [n_head*hd][n_embd], [n_kv*hd][n_embd] x2, [n_embd][n_head*hd] */
    const float *bq, *bk, *bv;  /* [n_head*hd], [n_kv*hd] x2 or NULL */
    const float *ffn_norm;      /* [n_embd] */
    tensor w_gate, w_up, w_down; /* [n_ff][n_embd] x2, [n_embd][n_ff] */
} layer_w;

typedef struct hparams {
    int n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx_train;
    float rope_base, norm_eps;
} hparams;

struct sd_model {
    const arch_desc *arch;
    hparams hp;
    tensor tok_embd;          /* [n_vocab][n_embd] */
    const float *out_norm;    /* [n_embd] */
    tensor output;            /* [n_vocab][n_embd] (== tok_embd when tied) */
    layer_w *layers;          /* [n_layer] */
    tokenizer *tok;
    uint32_t main_type;       /* type of the layer matrices (for info) */
    size_t weight_bytes;
    size_t decode_bytes;      /* weight bytes read per decode step */
    gguf_file gguf;           /* GGUF models: the mapping + tables */
    mapfile bin;              /* llama2.c models: the mapping */
    float **owned;            /* [n_owned] converted copies (norm weights stored in another type) */
    int n_owned;
    char *path;               /* the file it was loaded from (for messages) */
};

/* Dequantizes row r of t into out[t->cols]. */
void tensor_get_row(const tensor *t, int64_t r, float *out);
#endif
