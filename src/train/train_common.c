/* train_common: the corpus reader, the clock and AdamW shared by the trainers. */
#define _POSIX_C_SOURCE 200809L
#include "train/train_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/err.h"

double train_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void train_free_stories(int32_t **seqs, int *lens, int n_seq) {
    for (int i = 0; seqs && i < n_seq; i++) free(seqs[i]);
    free(seqs);
    free(lens);
}

void train_adamw(float *w, const float *g, float *m, float *v, size_t n, float lr, float wd, int step) {
    const float b1 = 0.9f, b2 = 0.999f, ae = 1e-8f;
    const float c1 = 1.0f - powf(b1, (float)step), c2 = 1.0f - powf(b2, (float)step);
    for (size_t i = 0; i < n; i++) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        w[i] -= lr * ((m[i] / c1) / (sqrtf(v[i] / c2) + ae) + wd * w[i]);
    }
}

int32_t **train_read_stories(const sd_model *m, const char *path, int seq_len, int want_tokens, int **lens, int *n_seq,
                             sd_error *err) {
    char *txt = NULL;
    if (sd_read_text_file(path, (size_t)1 << 30, &txt, NULL, err) != SD_OK) {
        err_prefix(err, "corpus: ");
        return NULL;
    }
    int32_t **seqs = NULL;
    *lens = NULL;
    *n_seq = 0;
    int total = 0, cap = 0;
    const char *sep = "<|endofstory|>";
    int32_t *buf = malloc((size_t)(seq_len + 1) * 4 * sizeof *buf);
    for (char *p = txt; *p && total < want_tokens && buf;) {
        char *e = strstr(p, sep);
        size_t len = e ? (size_t)(e - p) : strlen(p);
        while (len > 0 && (p[0] == '\n' || p[0] == ' ')) p++, len--;
        while (len > 0 && (p[len - 1] == '\n' || p[len - 1] == ' ')) len--;
        if (len > (size_t)seq_len * 8) len = (size_t)seq_len * 8; /* far more text than seq_len tokens */
        int n = 0;
        if (len > 0) sd_tokenize(m, p, len, sd_model_add_bos(m), false, buf, seq_len, &n, NULL);
        if (n > seq_len) n = seq_len;
        if (n >= 2) {
            if (*n_seq == cap) {
                cap = cap ? cap * 2 : 64;
                int32_t **ns = realloc(seqs, (size_t)cap * sizeof *ns);
                int *nl = realloc(*lens, (size_t)cap * sizeof *nl);
                if (ns) seqs = ns;
                if (nl) *lens = nl;
                if (!ns || !nl) break;
            }
            seqs[*n_seq] = malloc((size_t)n * sizeof **seqs);
            if (!seqs[*n_seq]) break;
            memcpy(seqs[*n_seq], buf, (size_t)n * sizeof *buf);
            (*lens)[(*n_seq)++] = n;
            total += n;
        }
        if (!e) break;
        p = e + strlen(sep);
    }
    free(buf);
    free(txt);
    if (total < 16) {
        for (int i = 0; i < *n_seq; i++) free(seqs[i]);
        free(seqs);
        free(*lens);
        err_set(err, SD_ERR_FORMAT, "%s: too little text (%d tokens) to train on", path, total);
        return NULL;
    }
    return seqs;
}

