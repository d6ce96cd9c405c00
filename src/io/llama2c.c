#include "io/llama2c.h"

#include <stdint.h>
#include <string.h>

#include "util/err.h"

sd_status llama2c_parse(llama2c_weights *w, const unsigned char *data, size_t size, sd_error *err) {
    int32_t h[7];
    if (size < sizeof h) return err_set(err, SD_ERR_FORMAT, "not a model file: %zu bytes is too short for a llama2.c header", size);
    memcpy(h, data, sizeof h);
    int shared = h[5] > 0;
    int64_t vocab = h[5] < 0 ? -(int64_t)h[5] : h[5];
    if (h[0] <= 0 || h[0] > 65536 || h[1] <= 0 || h[1] > (1 << 20) || h[2] <= 0 || h[2] > 1024 || h[3] <= 0 ||
        h[3] > 1024 || h[4] <= 0 || h[4] > h[3] || vocab <= 0 || vocab > (1 << 22) || h[6] <= 0 || h[6] > (1 << 24) ||
        h[0] % h[3] != 0 || h[3] % h[4] != 0 || (h[0] / h[3]) % 2 != 0)
        return err_set(err, SD_ERR_FORMAT,
                       "not a GGUF file and not a valid llama2.c checkpoint (header dim=%d hidden=%d layers=%d heads=%d "
                       "kv_heads=%d vocab=%d seq_len=%d)",
                       h[0], h[1], h[2], h[3], h[4], h[5], h[6]);
    int64_t dim = h[0], hid = h[1], L = h[2], kv_dim = dim / h[3] * h[4], head = dim / h[3], seq = h[6];
    int64_t n_floats = vocab * dim + L * dim + L * dim * dim + 2 * L * kv_dim * dim + L * dim * dim + L * dim +
                       3 * L * hid * dim + dim + seq * head;
    if (!shared) n_floats += vocab * dim;
    uint64_t want = 28 + (uint64_t)n_floats * 4;
    if (want != size)
        return err_set(err, SD_ERR_FORMAT,
                       "llama2.c checkpoint size mismatch: the header announces %llu bytes, the file has %zu (truncated or "
                       "not a v0 checkpoint)",
                       (unsigned long long)want, size);
    w->dim = h[0];
    w->hidden_dim = h[1];
    w->n_layers = h[2];
    w->n_heads = h[3];
    w->n_kv_heads = h[4];
    w->n_vocab = (int)vocab;
    w->seq_len = h[6];
    const float *p = (const float *)(const void *)(data + 28);
    w->token_embd = p; p += vocab * dim;
    w->rms_att = p; p += L * dim;
    w->wq = p; p += L * dim * dim;
    w->wk = p; p += L * kv_dim * dim;
    w->wv = p; p += L * kv_dim * dim;
    w->wo = p; p += L * dim * dim;
    w->rms_ffn = p; p += L * dim;
    w->w1 = p; p += L * hid * dim;
    w->w2 = p; p += L * dim * hid;
    w->w3 = p; p += L * hid * dim;
    w->rms_final = p; p += dim;
    p += seq * head; /* freq_cis_real + freq_cis_imag: seq * head/2 each */
    w->wcls = shared ? w->token_embd : p;
    return SD_OK;
}
