/* testlib: a minimal test harness (counters, CHECK, paths to ../shared, reference-file reader). */
#ifndef SD_TESTLIB_H
#define SD_TESTLIB_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "specdec.h"

extern int tl_pass, tl_fail;

#define CHECK(cond, ...)                                                                                         \
    do {                                                                                                         \
        if (cond) {                                                                                              \
            tl_pass++;                                                                                           \
        } else {                                                                                                 \
            tl_fail++;                                                                                           \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                 \
            fprintf(stderr, __VA_ARGS__);                                                                        \
            fputc('\n', stderr);                                                                                 \
        }                                                                                                        \
    } while (0)

/* Prints "<name>: N passed, M failed" and returns the exit code. */
int tl_finish(const char *name);
/* Path under the shared folder ($SHARED, default ../shared); static buffer per call slot (4 rotating). */
const char *tl_shared(const char *rel);
/* Reads a whole file; NULL on failure. *len gets the size. */
unsigned char *tl_read_file(const char *path, size_t *len);
bool tl_write_file(const char *path, const void *data, size_t len);
/* SPECDEC_TEST_SCALE (default 1): < 1 asks for a lighter run (the sanitizer build). */
double tl_scale(void);
/* Loads a model under the shared folder; on failure a failed CHECK and NULL. */
sd_model *tl_load_model(const char *rel);
/* A context of m with cp; on failure a failed CHECK and NULL. tl_ctx: the default parameters but these. */
sd_ctx *tl_ctx_with(const sd_model *m, const sd_ctx_params *cp);
sd_ctx *tl_ctx(const sd_model *m, int n_ctx, int n_seq, int n_batch, int n_threads);
/* Pearson's chi-square of counts (N draws over V outcomes) against probabilities p, outcomes expected fewer than 5
 * times pooled into one; *dof gets the degrees of freedom. tl_chi2_ok: below a bound that a true distribution exceeds
 * with probability about 1e-4. */
double tl_chi2(const int *counts, const double *p, int V, int N, int *dof);
bool tl_chi2_ok(double c, int dof);
/* Whether sequence 0 of a and b holds the same K/V bits at positions [0, upto) of every layer (kvd floats each of K
 * and V per row); with exact_len also that a's cache holds exactly upto positions in every layer. */
bool tl_same_kv_rows(sd_ctx *a, sd_ctx *b, int n_layer, int kvd, int upto, bool exact_len);
/* K/V floats per cached row of m (KV heads x head size); *n_layer gets its layer count. */
int tl_kv_dim(const sd_model *m, int *n_layer);
/* Feeds seq[0..n) into sequence 0 of c from an empty cache, in blocks of 32 (a plain run's cache). */
void tl_plain_cache(sd_ctx *c, const int32_t *seq, int n);
/* n seeded runs (sampler spp with seeds seed0, seed0 + 1, ...) of sd_spec_generate with sp, 3 tokens each after
 * prompt[np]: counts[V] of the first emitted token; returns how many runs drafted something. */
int tl_first_tokens(sd_ctx *ct, const sd_spec_params *sp, sd_sampler_params spp, const int32_t *prompt, int np,
                    int V, int n, uint64_t seed0, int *counts);

typedef struct tl_logits {
    int pos, n_vocab;
    float *v; /* [n_vocab] */
} tl_logits;

typedef struct tl_prompt {
    char *text;
    int32_t *tokens;
    int n_tokens;
    tl_logits *logits;
    int n_logits;
    int32_t *greedy;
    int n_greedy;
} tl_prompt;

typedef struct tl_ref {
    tl_prompt *p;
    int n;
} tl_ref;

bool tl_ref_load(const char *path, tl_ref *ref);
void tl_ref_free(tl_ref *ref);

/* The reference models: name (file stem), and whether its weights are f32. */
typedef struct tl_model_case {
    const char *name;
    const char *file;
} tl_model_case;
extern const tl_model_case TL_MODELS[];
extern const int TL_N_MODELS;
#endif
