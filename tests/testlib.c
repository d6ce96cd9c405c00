#define _POSIX_C_SOURCE 200809L
#include "testlib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int tl_pass, tl_fail;

const tl_model_case TL_MODELS[] = {
    {"stories260K", "models/stories260K.gguf"},
    {"stories-ee", "models/stories-ee.gguf"},
    {"stories-plain", "models/stories-plain.gguf"},
    {"tiny-llama-spm-f32", "models/tiny-llama-spm-f32.gguf"},
    {"tiny-llama-spm-f16", "models/tiny-llama-spm-f16.gguf"},
    {"tiny-llama-spm-bf16", "models/tiny-llama-spm-bf16.gguf"},
    {"tiny-llama-spm-q8_0", "models/tiny-llama-spm-q8_0.gguf"},
    {"tiny-llama-spm-q4_0", "models/tiny-llama-spm-q4_0.gguf"},
    {"tiny-llama-gpt2-f32", "models/tiny-llama-gpt2-f32.gguf"},
    {"tiny-qwen2-gpt2-f32", "models/tiny-qwen2-gpt2-f32.gguf"},
};
const int TL_N_MODELS = sizeof TL_MODELS / sizeof TL_MODELS[0];

int tl_finish(const char *name) {
    printf("%s: %d passed, %d failed\n", name, tl_pass, tl_fail);
    return tl_fail ? 1 : 0;
}

const char *tl_shared(const char *rel) {
    static char buf[4][1024];
    static int slot;
    const char *root = getenv("SHARED");
    if (!root || !*root) root = "../shared";
    char *b = buf[slot++ % 4];
    snprintf(b, 1024, "%s/%s", root, rel);
    return b;
}

unsigned char *tl_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) {
        b[n] = 0;
        if (len) *len = (size_t)n;
    }
    return b;
}

bool tl_write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, len, f) == len;
    return fclose(f) == 0 && ok;
}

static int32_t *parse_ids(char *s, int *n) {
    char *end;
    long cnt = strtol(s, &end, 10);
    int32_t *ids = malloc((size_t)(cnt > 0 ? cnt : 1) * sizeof *ids);
    for (long i = 0; i < cnt; i++) ids[i] = (int32_t)strtol(end, &end, 10);
    *n = (int)cnt;
    return ids;
}

bool tl_ref_load(const char *path, tl_ref *ref) {
    memset(ref, 0, sizeof *ref);
    size_t len;
    char *txt = (char *)tl_read_file(path, &len);
    if (!txt) return false;
    char *save = NULL;
    for (char *line = strtok_r(txt, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(line, "prompt ", 7)) {
            ref->p = realloc(ref->p, (size_t)(ref->n + 1) * sizeof *ref->p);
            memset(&ref->p[ref->n], 0, sizeof *ref->p);
            ref->p[ref->n].text = strdup(line + 7);
            ref->n++;
        } else if (ref->n == 0) {
            continue;
        } else if (!strncmp(line, "tokens ", 7)) {
            tl_prompt *p = &ref->p[ref->n - 1];
            p->tokens = parse_ids(line + 7, &p->n_tokens);
        } else if (!strncmp(line, "greedy ", 7)) {
            tl_prompt *p = &ref->p[ref->n - 1];
            p->greedy = parse_ids(line + 7, &p->n_greedy);
        } else if (!strncmp(line, "logits ", 7)) {
            tl_prompt *p = &ref->p[ref->n - 1];
            p->logits = realloc(p->logits, (size_t)(p->n_logits + 1) * sizeof *p->logits);
            tl_logits *lg = &p->logits[p->n_logits++];
            char *end;
            lg->pos = (int)strtol(line + 7, &end, 10);
            lg->n_vocab = (int)strtol(end, &end, 10);
            lg->v = malloc((size_t)lg->n_vocab * sizeof *lg->v);
            for (int i = 0; i < lg->n_vocab; i++) lg->v[i] = strtof(end, &end);
        }
    }
    free(txt);
    return ref->n > 0;
}

void tl_ref_free(tl_ref *ref) {
    for (int i = 0; i < ref->n; i++) {
        tl_prompt *p = &ref->p[i];
        free(p->text);
        free(p->tokens);
        free(p->greedy);
        for (int k = 0; k < p->n_logits; k++) free(p->logits[k].v);
        free(p->logits);
    }
    free(ref->p);
    memset(ref, 0, sizeof *ref);
}

double tl_scale(void) {
    const char *s = getenv("SPECDEC_TEST_SCALE");
    return s ? atof(s) : 1.0;
}

sd_model *tl_load_model(const char *rel) {
    sd_model *m = NULL;
    sd_error err;
    if (sd_model_load(tl_shared(rel), NULL, &m, &err) != SD_OK) CHECK(0, "load %s: %s", rel, err.msg);
    return m;
}

sd_ctx *tl_ctx_with(const sd_model *m, const sd_ctx_params *cp) {
    sd_ctx *c = NULL;
    sd_error err;
    if (sd_ctx_new(m, cp, &c, &err) != SD_OK) CHECK(0, "ctx: %s", err.msg);
    return c;
}

sd_ctx *tl_ctx(const sd_model *m, int n_ctx, int n_seq, int n_batch, int n_threads) {
    sd_ctx_params cp = sd_ctx_default_params();
    cp.n_ctx = n_ctx, cp.n_seq = n_seq, cp.n_batch = n_batch, cp.n_threads = n_threads;
    return tl_ctx_with(m, &cp);
}

double tl_chi2(const int *counts, const double *p, int V, int N, int *dof) {
    double c = 0, rest_e = 0, rest_o = 0;
    *dof = -1;
    for (int i = 0; i < V; i++) {
        double e = p[i] * N;
        if (e < 5) {
            rest_e += e;
            rest_o += counts[i];
            continue;
        }
        c += (counts[i] - e) * (counts[i] - e) / e;
        (*dof)++;
    }
    if (rest_e >= 5) {
        c += (rest_o - rest_e) * (rest_o - rest_e) / rest_e;
        (*dof)++;
    }
    return c;
}

bool tl_chi2_ok(double c, int dof) { return c < dof + 4.0 * sqrt(2.0 * dof) + 10; }

bool tl_same_kv_rows(sd_ctx *a, sd_ctx *b, int n_layer, int kvd, int upto, bool exact_len) {
    float *ka = malloc((size_t)kvd * 4 * sizeof(float)), *va = ka + kvd, *kb = va + kvd, *vb = kb + kvd;
    bool same = ka != NULL;
    for (int l = 0; l < n_layer && same; l++) {
        if (exact_len && sd_kv_len(a, 0, l) != upto) same = false;
        for (int p = 0; p < upto && same; p++) {
            if (sd_kv_read(a, 0, l, p, ka, va, NULL) || sd_kv_read(b, 0, l, p, kb, vb, NULL)) same = false;
            else same = memcmp(ka, kb, (size_t)kvd * 2 * sizeof(float)) == 0;
        }
    }
    free(ka);
    return same;
}

int tl_kv_dim(const sd_model *m, int *n_layer) {
    sd_model_info i;
    sd_model_get_info(m, &i);
    *n_layer = i.n_layer;
    return i.n_head_kv * (i.n_embd / i.n_head);
}

void tl_plain_cache(sd_ctx *c, const int32_t *seq, int n) {
    sd_kv_truncate(c, 0, 0, NULL);
    for (int i = 0; i < n; i += 32)
        sd_forward(c, &(sd_block){.n = n - i < 32 ? n - i : 32, .token = seq + i}, &(sd_forward_args){0}, NULL);
}

int tl_first_tokens(sd_ctx *ct, const sd_spec_params *sp, sd_sampler_params spp, const int32_t *prompt, int np,
                    int V, int n, uint64_t seed0, int *counts) {
    int drafted = 0;
    for (int t = 0; t < n; t++) {
        spp.seed = seed0 + (uint64_t)t;
        sd_sampler *s = NULL;
        if (sd_sampler_new(&spp, V, &s, NULL) != SD_OK) continue;
        int32_t outs[3];
        int n_out = 0;
        sd_spec_stats st = {0};
        /* 3 tokens so that the first round drafts (a round drafts no more than what is left to emit) */
        sd_spec_generate(ct, s, sp, prompt, np, 3, true, outs, &n_out, NULL, NULL, &st, NULL);
        if (n_out >= 1) counts[outs[0]]++;
        drafted += st.n_drafted > 0;
        sd_sampler_free(s);
    }
    return drafted;
}
