/* SpecDec++ (acceptance head + the specdecpp controller): a small training run on the story pair (target stories-ee,
 * draft stories260K, greedy labels) lowers the held-out loss and its head separates accepted from rejected drafts
 * better than the draft's top-1 probability; the same seed gives the same head; save + load round-trips bit for
 * bit; heads are refused for another draft model or another exit layer; the controller keeps greedy output equal to
 * plain greedy decoding with the draft model, with early exit and with SWIFT's layer skipping (a head trained on a
 * skip set of the target), and its threshold moves the draft length; SWIFT heads are tied to the target and the
 * skip set's size, and refused for the other drafters (and theirs for SWIFT). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/accept_head.h"
#include "specdec.h"
#include "testlib.h"

typedef struct rounds {
    int n, drafted;
} rounds;

static bool on_round(const sd_spec_round *r, void *user) {
    rounds *c = user;
    c->n++;
    c->drafted += r->n_drafted;
    return true;
}

static sd_accept_train_params small_params(void) {
    sd_accept_train_params tp = sd_accept_train_default_params();
    tp.corpus_path = tl_shared("data/stories_corpus.txt");
    tp.n_tokens = 2000;
    tp.temp = 0; /* greedy labels: what greedy decoding accepts */
    tp.epochs = 3;
    tp.n_threads = 1;
    return tp;
}

static bool same_head(const sd_accept_head *a, const sd_accept_head *b) {
    const size_t D = (size_t)a->dim;
    return a->dim == b->dim && a->blocks == b->blocks && a->shared == b->shared && a->n_sets == b->n_sets &&
           a->depth == b->depth && a->model_check == b->model_check &&
           !memcmp(a->W, b->W, (size_t)a->n_sets * D * D * sizeof(float)) &&
           !memcmp(a->b, b->b, (size_t)a->n_sets * D * sizeof(float)) && !memcmp(a->w_out, b->w_out, D * sizeof(float)) &&
           a->b_out == b->b_out && a->n_skip == b->n_skip && !a->skip == !b->skip &&
           (!a->skip || !memcmp(a->skip, b->skip, 2 * (size_t)a->n_layer));
}

/* Greedy output of method sp vs plain for a few prompts and thresholds; mean drafts per round at each threshold. */
static void check_greedy(const char *what, sd_model *tm, sd_ctx *ct, sd_spec_params sp, double *per_round, int n_h,
                         const float *hs) {
    const char *prompts[] = {"Once upon a time", "A snowman stood in the yard", "Tim had a new toy car"};
    sd_sampler_params spp = sd_sampler_default_params();
    spp.temp = 0;
    sd_sampler *smp = NULL;
    sd_error err;
    sd_sampler_new(&spp, 512, &smp, &err);
    for (int hi = 0; hi < n_h; hi++) {
        rounds rc = {0};
        sp.stop_threshold = hs[hi];
        sp.round_cb = on_round;
        sp.round_user = &rc;
        for (int pi = 0; pi < 3; pi++) {
            int32_t prompt[64], plain[80], got[80];
            int np = 0, n_plain = 0, n_got = 0;
            sd_tokenize(tm, prompts[pi], strlen(prompts[pi]), true, false, prompt, 64, &np, NULL);
            sd_status a = sd_generate(ct, smp, prompt, np, 80, true, plain, &n_plain, NULL, NULL, NULL, &err);
            sd_status b = sd_spec_generate(ct, smp, &sp, prompt, np, 80, true, got, &n_got, NULL, NULL, NULL, &err);
            CHECK(a == SD_OK && b == SD_OK && n_got == n_plain && !memcmp(got, plain, (size_t)n_got * sizeof *got),
                  "%s, h %g, '%s': output differs from plain greedy (%s)", what, hs[hi], prompts[pi], b ? err.msg : "");
        }
        per_round[hi] = rc.n ? (double)rc.drafted / rc.n : 0;
    }
    sd_sampler_free(smp);
}

int main(void) {
    sd_error err;
    sd_model *ee = NULL, *m260 = NULL, *plain = NULL, *spm = NULL;
    if (sd_model_load(tl_shared("models/stories-ee.gguf"), NULL, &ee, &err) ||
        sd_model_load(tl_shared("models/stories260K.gguf"), NULL, &m260, &err) ||
        sd_model_load(tl_shared("models/stories-plain.gguf"), NULL, &plain, &err) ||
        sd_model_load(tl_shared("models/tiny-llama-spm-f32.gguf"), NULL, &spm, &err)) {
        CHECK(0, "load: %s", err.msg);
        return tl_finish("test_accept");
    }
    /* training (the default size, greedy labels): loss down, head AUC above the top-1 baseline */
    sd_accept_train_params tp = small_params();
    tp.n_tokens = sd_accept_train_default_params().n_tokens;
    tp.epochs = sd_accept_train_default_params().epochs;
    sd_accept_head *h = NULL, *h2 = NULL, *h3 = NULL, *he = NULL, *loaded = NULL;
    sd_accept_train_report rep, rep2;
    sd_status st = sd_train_accept_head(ee, m260, &tp, &h, &rep, &err);
    CHECK(st == SD_OK, "train: %s", st ? err.msg : "");
    if (st) return tl_finish("test_accept");
    CHECK(rep.n_heldout >= 1000 && rep.n_train > 10000, "split: %d train, %d held out", rep.n_train, rep.n_heldout);
    CHECK(rep.loss_last < rep.loss_first, "training loss %.4f -> %.4f", rep.loss_first, rep.loss_last);
    CHECK(rep.kl_after < 0.8 * rep.kl_before, "held-out binary KL %.4f -> %.4f", rep.kl_before, rep.kl_after);
    CHECK(rep.kept_epoch >= 1, "no epoch beat the constant predictor");
    CHECK(rep.auc_head > rep.auc_top1 && rep.auc_head > 0.8, "held-out AUC head %.3f vs top-1 %.3f", rep.auc_head,
          rep.auc_top1);
    /* deterministic for a seed (small runs) */
    tp = small_params();
    st = sd_train_accept_head(ee, m260, &tp, &h2, &rep, &err);
    CHECK(st == SD_OK && sd_train_accept_head(ee, m260, &tp, &h3, &rep2, &err) == SD_OK && same_head(h2, h3) &&
              rep2.auc_head == rep.auc_head, "same seed, other head");
    CHECK(rep.loss_last < rep.loss_first && rep.kl_after < rep.kl_before, "small run: loss %.4f -> %.4f, KL %.4f -> %.4f",
          rep.loss_first, rep.loss_last, rep.kl_before, rep.kl_after);
    sd_accept_head_free(h3);
    h3 = NULL;
    tp.seed = 2;
    st = sd_train_accept_head(ee, m260, &tp, &h3, NULL, &err);
    CHECK(st == SD_OK && !same_head(h2, h3), "another seed gave the same head");
    sd_accept_head_free(h2);
    sd_accept_head_free(h3);

    /* save + load */
    char path[] = "/tmp/test_accept_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    st = sd_accept_head_save(h, path, &err);
    CHECK(st == SD_OK, "save: %s", st ? err.msg : "");
    st = sd_accept_head_load(path, &loaded, &err);
    CHECK(st == SD_OK && loaded && same_head(h, loaded), "load: %s", st ? err.msg : "differs");
    /* a model file is not a head */
    sd_accept_head *bad = NULL;
    st = sd_accept_head_load(tl_shared("models/stories260K.gguf"), &bad, &err);
    CHECK(st == SD_ERR_FORMAT && !bad && strstr(err.msg, "not an acceptance-head file"), "model as head: %s", err.msg);

    /* tied to its drafter */
    CHECK(sd_accept_head_check(h, m260, 5, &err) == SD_OK, "head refused for its own draft: %s", err.msg);
    st = sd_accept_head_check(h, ee, 8, &err);
    CHECK(st == SD_ERR_ARG && strstr(err.msg, "another draft model"), "head for stories260K on stories-ee: %s", err.msg);
    st = sd_accept_head_check(h, spm, 4, &err);
    CHECK(st == SD_ERR_ARG && strstr(err.msg, "another draft model"), "head on tiny-llama: %s", err.msg);

    /* early exit: a head on the exit state at E = 3 */
    tp = small_params();
    tp.exit_layer = 3;
    tp.n_tokens = 1000;
    st = sd_train_accept_head(ee, NULL, &tp, &he, NULL, &err);
    CHECK(st == SD_OK, "train early exit: %s", st ? err.msg : "");
    if (he) {
        st = sd_accept_head_check(he, ee, 4, &err);
        CHECK(st == SD_ERR_ARG && strstr(err.msg, "after 3"), "exit head at another layer: %s", err.msg);
        st = sd_accept_head_check(he, plain, 3, &err);
        CHECK(st == SD_ERR_ARG && strstr(err.msg, "other weights"), "exit head on stories-plain: %s", err.msg);
    }
    /* SWIFT: a head on the skipped target's last state, for the starting set at the default ratio (5 of 12) */
    sd_accept_head *hsw = NULL, *hsw_loaded = NULL;
    uint8_t mask[16];
    sd_swift_state *sws = NULL;
    sd_swift_state_new(8, NULL, 1, &sws, &err);
    const int n_skip = sd_swift_state_best(sws, mask, NULL, NULL);
    sd_swift_state_free(sws);
    tp = small_params();
    tp.skip = mask;
    tp.n_tokens = 1000;
    tp.epochs = 2;
    st = sd_train_accept_head(ee, NULL, &tp, &hsw, &rep, &err);
    CHECK(st == SD_OK && n_skip == 5, "train SWIFT: %s", st ? err.msg : "");
    if (hsw) {
        uint8_t got[16];
        CHECK(sd_accept_head_skip_set(hsw, got) == n_skip && !memcmp(got, mask, 16), "the head's skip set");
        CHECK(sd_accept_head_skip_set(h, NULL) == 0, "a draft model's head has no skip set");
        CHECK(sd_accept_head_check_swift(hsw, ee, n_skip, &err) == SD_OK, "SWIFT head refused: %s", err.msg);
        st = sd_accept_head_check_swift(hsw, ee, 3, &err);
        CHECK(st == SD_ERR_ARG && strstr(err.msg, "skips 3"), "SWIFT head at another ratio: %s", err.msg);
        st = sd_accept_head_check_swift(hsw, plain, n_skip, &err);
        CHECK(st == SD_ERR_ARG && strstr(err.msg, "another target"), "SWIFT head on stories-plain: %s", err.msg);
        st = sd_accept_head_check(hsw, ee, 8, &err);
        CHECK(st == SD_ERR_ARG && strstr(err.msg, "SWIFT"), "SWIFT head as a draft model's: %s", err.msg);
        st = sd_accept_head_check_swift(h, ee, n_skip, &err);
        CHECK(st == SD_ERR_ARG && strstr(err.msg, "another drafter"), "draft head for SWIFT: %s", err.msg);
        if (he) {
            st = sd_accept_head_check_swift(he, ee, n_skip, &err);
            CHECK(st == SD_ERR_ARG && strstr(err.msg, "early exit"), "exit head for SWIFT: %s", err.msg);
        }
        char p2[] = "/tmp/test_accept_swift_XXXXXX";
        int fd2 = mkstemp(p2);
        if (fd2 >= 0) close(fd2);
        st = sd_accept_head_save(hsw, p2, &err);
        if (!st) st = sd_accept_head_load(p2, &hsw_loaded, &err);
        CHECK(st == SD_OK && hsw_loaded && same_head(hsw, hsw_loaded), "SWIFT head save/load: %s", st ? err.msg : "differs");
        unlink(p2);
    }
    /* a SWIFT head's file whose skip set skips a sub-layer of the first or last layer (no SWIFT set does, the trainer
     * refuses them) is damaged */
    for (int bad_at = 0; bad_at < 2; bad_at++) {
        sd_accept_head *hb = accept_head_new(ee, 8, 1, false), *hl = NULL;
        uint8_t bm[16] = {0};
        bm[4] = bm[5] = 1;         /* layer 2 */
        bm[bad_at ? 15 : 0] = 1;   /* the MLP of layer 7 (the last), or the attention of layer 0 */
        char p3[] = "/tmp/test_accept_badskip_XXXXXX";
        int fd3 = mkstemp(p3);
        if (fd3 >= 0) close(fd3);
        CHECK(hb && accept_head_set_skip(hb, bm) && sd_accept_head_save(hb, p3, &err) == SD_OK, "save: %s", err.msg);
        err = (sd_error){0};
        st = sd_accept_head_load(p3, &hl, &err);
        CHECK(st == SD_ERR_FORMAT && !hl && strstr(err.msg, "skip set"), "a skip set skipping %s loaded: %d '%s'",
              bad_at ? "layer 7 of 8" : "layer 0", st, err.msg);
        sd_accept_head_free(hl);
        sd_accept_head_free(hb);
        unlink(p3);
    }
    /* bad trainer input */
    tp = small_params();
    tp.n_tokens = 0;
    sd_accept_head *x = NULL;
    CHECK(sd_train_accept_head(ee, m260, &tp, &x, NULL, &err) == SD_ERR_ARG && !x, "tokens 0 accepted");
    tp.n_tokens = 2000;
    st = sd_train_accept_head(ee, spm, &tp, &x, NULL, &err);
    CHECK(st != SD_OK && !x && strstr(err.msg, "cannot draft"), "draft with another vocabulary: %s", err.msg);
    tp.exit_layer = 8;
    st = sd_train_accept_head(ee, NULL, &tp, &x, NULL, &err);
    CHECK(st == SD_ERR_ARG && !x, "exit layer 8 of 8 accepted");
    tp.exit_layer = 0;
    tp.skip = mask;
    st = sd_train_accept_head(ee, m260, &tp, &x, NULL, &err);
    CHECK(st == SD_ERR_ARG && !x && strstr(err.msg, "one drafter"), "a draft model and a skip set: %s", err.msg);
    uint8_t first[16] = {1};
    tp.skip = first;
    st = sd_train_accept_head(ee, NULL, &tp, &x, NULL, &err);
    CHECK(st == SD_ERR_ARG && !x && strstr(err.msg, "first"), "a skip set skipping layer 0: %s", err.msg);

    /* the controller: lossless with both drafters; a lower threshold drafts less per round */
    sd_ctx_params cp = sd_ctx_default_params();
    cp.n_threads = 1;
    sd_ctx *ct = NULL, *cd = NULL;
    if (sd_ctx_new(ee, &cp, &ct, &err) || sd_ctx_new(m260, &cp, &cd, &err)) {
        CHECK(0, "ctx: %s", err.msg);
    } else {
        const float hs[3] = {0.05f, 0.5f, 0.95f};
        double per[3];
        sd_spec_params sp = sd_spec_default_params();
        sp.method = SD_SPEC_DRAFT;
        sp.draft_ctx = cd;
        sp.ctrl = SD_CTRL_SPECDECPP;
        sp.gamma_max = 20;
        sp.accept_head = loaded;
        check_greedy("draft model", ee, ct, sp, per, 3, hs);
        CHECK(per[0] < per[1] && per[1] < per[2], "drafts per round by threshold: %.2f %.2f %.2f", per[0], per[1], per[2]);
        if (he) {
            sp = sd_spec_default_params();
            sp.method = SD_SPEC_EARLY_EXIT;
            sp.exit_layer = 3;
            sp.ctrl = SD_CTRL_SPECDECPP;
            sp.gamma_max = 20;
            sp.accept_head = he;
            check_greedy("early exit", ee, ct, sp, per, 3, hs);
            CHECK(per[0] < per[2], "early exit drafts per round by threshold: %.2f %.2f %.2f", per[0], per[1], per[2]);
            /* the wrong head for the drafter is refused before any work */
            sp.accept_head = loaded;
            int32_t prompt[4] = {1, 400, 401, 402}, out[8];
            int n_out = 0;
            sd_sampler_params spp = sd_sampler_default_params();
            spp.temp = 0;
            sd_sampler *smp = NULL;
            sd_sampler_new(&spp, 512, &smp, &err);
            st = sd_spec_generate(ct, smp, &sp, prompt, 4, 8, true, out, &n_out, NULL, NULL, NULL, &err);
            CHECK(st == SD_ERR_ARG && strstr(err.msg, "another draft model"), "early exit with the draft's head: %s",
                  err.msg);
            sp.accept_head = NULL;
            st = sd_spec_generate(ct, smp, &sp, prompt, 4, 8, true, out, &n_out, NULL, NULL, NULL, &err);
            CHECK(st == SD_ERR_ARG && strstr(err.msg, "needs an acceptance head"), "specdecpp without a head: %s", err.msg);
            sp.method = SD_SPEC_NGRAM;
            sp.accept_head = he;
            st = sd_spec_generate(ct, smp, &sp, prompt, 4, 8, true, out, &n_out, NULL, NULL, NULL, &err);
            CHECK(st == SD_ERR_ARG && strstr(err.msg, "hidden states"), "specdecpp with ngram: %s", err.msg);
            sd_sampler_free(smp);
        }
        if (hsw_loaded) { /* SWIFT: the head replaces the p_stop rule */
            sp = sd_spec_default_params();
            sp.method = SD_SPEC_SWIFT;
            sp.ctrl = SD_CTRL_SPECDECPP;
            sp.swift_window = 8;
            sp.accept_head = hsw_loaded;
            check_greedy("swift", ee, ct, sp, per, 3, hs);
            CHECK(per[0] < per[2], "swift drafts per round by threshold: %.2f %.2f %.2f", per[0], per[1], per[2]);
            sp.accept_head = loaded; /* the draft model's head */
            CHECK(sd_spec_check(ee, NULL, &sp, &err) == SD_ERR_ARG && strstr(err.msg, "another drafter"),
                  "swift with the draft's head: %s", err.msg);
            sp.accept_head = hsw_loaded;
            sp.tree_nodes = 8;
            CHECK(sd_spec_check(ee, NULL, &sp, &err) == SD_ERR_ARG && strstr(err.msg, "token tree"),
                  "swift trees with specdecpp: %s", err.msg);
        }
    }
    sd_ctx_free(cd);
    sd_ctx_free(ct);
    unlink(path);
    sd_accept_head_free(h);
    sd_accept_head_free(he);
    sd_accept_head_free(hsw);
    sd_accept_head_free(hsw_loaded);
    sd_accept_head_free(loaded);
    sd_model_free(spm);
    sd_model_free(plain);
    sd_model_free(m260);
    sd_model_free(ee);
    return tl_finish("test_accept");
}
