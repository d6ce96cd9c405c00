/* llama2c: llama2.c model checkpoints (legacy v0 format).
 * Header: 7 x int32 {dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len}; a negative vocab_size
 * means the classifier is stored separately (unshared). Then fp32 arrays: token_embedding[vocab][dim],
 * rms_att[L][dim], wq[L][dim][dim], wk[L][kv_dim][dim], wv[L][kv_dim][dim], wo[L][dim][dim], rms_ffn[L][dim],
 * w1[L][hidden][dim], w2[L][dim][hidden], w3[L][hidden][dim], rms_final[dim], freq_cis_real/imag[seq_len][head/2]
 * (unused: RoPE is recomputed), and wcls[vocab][dim] when unshared. */
#ifndef SD_IO_LLAMA2C_H
#define SD_IO_LLAMA2C_H
#include <stddef.h>

#include "specdec.h"

typedef struct llama2c_weights {
    int dim, hidden_dim, n_layers, n_heads, n_kv_heads, n_vocab, seq_len;
    const float *token_embd, *rms_att, *wq, *wk, *wv, *wo, *rms_ffn, *w1, *w2, *w3, *rms_final, *wcls;
} llama2c_weights;

/* Validates the header and that the file holds exactly the arrays it announces; views point into data
 * (which must be 4-byte aligned, as an mmap is). */
sd_status llama2c_parse(llama2c_weights *w, const unsigned char *data, size_t size, sd_error *err);
#endif
