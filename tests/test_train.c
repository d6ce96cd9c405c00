/* Exit-head trainer: on stories260K (a small corpus slice) the KL decreases and held-out agreement improves at every
 * trained depth; saved + loaded heads give bit-identical logits; heads for another model (shape, or same shape with
 * other weights) are refused; early exit with heads stays lossless. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "specdec.h"
#include "testlib.h"

int main(void) {
    sd_error err;
    sd_model *m = NULL, *ee = NULL, *pl = NULL;
    if (sd_model_load(tl_shared("models/stories260K.gguf"), NULL, &m, &err) ||
        sd_model_load(tl_shared("models/stories-ee.gguf"), NULL, &ee, &err) ||
        sd_model_load(tl_shared("models/stories-plain.gguf"), NULL, &pl, &err)) {
        CHECK(0, "load: %s", err.msg);
        return tl_finish("test_train");
    }
    sd_train_params tp = sd_train_default_params();
    tp.corpus_path = tl_shared("data/stories_corpus.txt");
    tp.n_train_tokens = 3000;
    tp.n_heldout_tokens = 1000;
    tp.epochs = 2;
    tp.n_threads = 2;
    sd_exit_heads *h = NULL;
    sd_train_report rep;
    CHECK(sd_train_exit_heads(m, &tp, &h, &rep, &err) == SD_OK, "train: %s", err.msg);
    if (!h) return tl_finish("test_train");
    int depths[8];
    CHECK(sd_exit_heads_depths(h, depths, 8) == 4, "every depth 1..4 trained");
    for (int d = 1; d < 5; d++) {
        CHECK(rep.loss_last[d] < rep.loss_first[d], "depth %d: KL did not decrease (%.4f -> %.4f)", d, rep.loss_first[d],
              rep.loss_last[d]);
        CHECK(rep.agree_after[d] > rep.agree_before[d], "depth %d: agreement did not improve (%.3f -> %.3f)", d,
              rep.agree_before[d], rep.agree_after[d]);
        printf("  depth %d: KL %.3f -> %.3f, held-out agreement %.3f -> %.3f\n", d, rep.loss_first[d], rep.loss_last[d],
               rep.agree_before[d], rep.agree_after[d]);
    }
    /* save, load, identical logits */
    char path[] = "/tmp/specdec-heads-XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    CHECK(sd_exit_heads_save(h, path, &err) == SD_OK, "save: %s", err.msg);
    sd_exit_heads *h2 = NULL;
    CHECK(sd_exit_heads_load(m, path, &h2, &err) == SD_OK, "load: %s", err.msg);
    sd_ctx_params cp = sd_ctx_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 2;
    sd_ctx *c = NULL;
    sd_ctx_new(m, &cp, &c, &err);
    int32_t toks[6] = {1, 403, 407, 261, 378, 432};
    float hid[6 * 64], l1[6 * 512], l2[6 * 512], l0[6 * 512];
    sd_forward(c, &(sd_block){.n = 6, .token = toks}, &(sd_forward_args){.layer_end = 2, .hidden = hid}, &err);
    bool same = h2 != NULL;
    for (int d = 1; d < 5 && h2; d++) {
        sd_lm_head(c, hid, 6, 2, h, l1, NULL);
        sd_lm_head(c, hid, 6, 2, h2, l2, NULL);
        same &= memcmp(l1, l2, sizeof l1) == 0;
    }
    CHECK(same, "saved/loaded heads give other logits");
    sd_lm_head(c, hid, 6, 2, NULL, l0, NULL);
    CHECK(memcmp(l0, l1, sizeof l0) != 0, "a trained head must change the exit logits");
    /* the logits of a forward with exit heads equal sd_lm_head's */
    sd_kv_truncate(c, 0, 0, NULL);
    uint8_t want[6] = {1, 1, 1, 1, 1, 1};
    sd_forward(c, &(sd_block){.n = 6, .token = toks}, &(sd_forward_args){.layer_end = 2, .want_logits = want, .logits = l2, .exit_heads = h}, &err);
    CHECK(memcmp(l1, l2, sizeof l1) == 0, "forward with heads != sd_lm_head");
    /* heads for another model */
    sd_exit_heads *x = NULL;
    CHECK(sd_exit_heads_load(ee, path, &x, &err) == SD_ERR_ARG && !x && strstr(err.msg, "another model"),
          "heads of stories260K accepted for stories-ee: %s", err.msg);
    sd_train_params tp2 = tp;
    tp2.n_train_tokens = 200;
    tp2.n_heldout_tokens = 50;
    tp2.epochs = 1;
    int one = 1;
    tp2.depths = &one;
    tp2.n_depths = 1;
    sd_exit_heads *he = NULL;
    CHECK(sd_train_exit_heads(ee, &tp2, &he, NULL, &err) == SD_OK, "train stories-ee depth 1: %s", err.msg);
    CHECK(he && sd_exit_heads_save(he, path, &err) == SD_OK, "save");
    CHECK(sd_exit_heads_load(pl, path, &x, &err) == SD_ERR_ARG && strstr(err.msg, "other weights"),
          "stories-ee heads accepted for stories-plain (same shape, other weights): %s", err.msg);
    CHECK(sd_exit_heads_load(m, tl_shared("models/stories260K.gguf"), &x, &err) == SD_ERR_FORMAT, "a model file as heads");
    int bad = 9;
    tp2.depths = &bad;
    CHECK(sd_train_exit_heads(m, &tp2, &x, NULL, &err) == SD_ERR_ARG, "depth out of range");
    /* early exit with heads: lossless */
    sd_sampler_params spp = sd_sampler_default_params();
    spp.temp = 0;
    sd_sampler *s;
    sd_sampler_new(&spp, 512, &s, NULL);
    sd_ctx_free(c);
    cp.n_ctx = 128;
    sd_ctx_new(m, &cp, &c, &err);
    int32_t plain[80], got[80];
    int np = 0, ng = 0;
    sd_generate(c, s, toks, 5, 80, true, plain, &np, NULL, NULL, NULL, &err);
    for (int E = 1; E < 5; E++) {
        sd_spec_params sp = sd_spec_default_params();
        sp.method = SD_SPEC_EARLY_EXIT;
        sp.exit_layer = E;
        sp.exit_heads = h;
        sp.gamma = 3;
        sd_spec_stats st;
        CHECK(sd_spec_generate(c, s, &sp, toks, 5, 80, true, got, &ng, NULL, NULL, &st, &err) == SD_OK, "spec: %s", err.msg);
        CHECK(ng == np && memcmp(plain, got, (size_t)np * sizeof *got) == 0, "early exit E=%d with heads differs", E);
        sp.exit_layer = 5;
        CHECK(sd_spec_generate(c, s, &sp, toks, 5, 10, true, got, &ng, NULL, NULL, NULL, &err) == SD_ERR_ARG, "E = L accepted");
    }
    unlink(path);
    sd_sampler_free(s);
    sd_ctx_free(c);
    sd_exit_heads_free(h);
    sd_exit_heads_free(h2);
    sd_exit_heads_free(he);
    sd_model_free(m);
    sd_model_free(ee);
    sd_model_free(pl);
    return tl_finish("test_train");
}
