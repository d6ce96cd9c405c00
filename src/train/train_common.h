/* train_common: what the trainers share — the corpus of stories, the clock, AdamW. */
#ifndef SD_TRAIN_TRAIN_COMMON_H
#define SD_TRAIN_TRAIN_COMMON_H
#include <stddef.h>
#include <stdint.h>

#include "specdec.h"

/* Splits the corpus into stories (separated by lines "<|endofstory|>") and tokenizes them with m (BOS as the model
 * says), each cut to seq_len tokens, until want_tokens tokens are read. Returns the sequences (free each and the
 * array, and *lens), or NULL with err set (unreadable, binary, or under 16 tokens of text). */
int32_t **train_read_stories(const sd_model *m, const char *path, int seq_len, int want_tokens, int **lens, int *n_seq,
                             sd_error *err);
void train_free_stories(int32_t **seqs, int *lens, int n_seq);
double train_now_s(void);
/* One AdamW step (beta 0.9 / 0.999, eps 1e-8) on w[n] with gradient g, moments m and v, decoupled weight decay wd
 * toward zero; step counts from 1. */
void train_adamw(float *w, const float *g, float *m, float *v, size_t n, float lr, float wd, int step);
#endif
