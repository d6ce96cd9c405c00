/* engine: the speculative parameters' defaults, the draft/target vocabulary rule, and sd_spec_generate — one
 * session (session.c) stepped until it is done. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "speculative/session.h"
#include "util/err.h"

sd_spec_params sd_spec_default_params(void) {
    sd_spec_params p = {0};
    p.method = SD_SPEC_NONE;
    p.ctrl = SD_CTRL_FIXED;
    p.gamma = 5;
    p.gamma_max = 16;
    p.p_min = 0.75f;
    p.dv_target = 0.8f;
    p.dv_eps = 0.01f;
    p.dv_theta0 = 0.5f;
    p.ngram_max = 3;
    p.ngram_min = 1;
    p.del_omega = 0.95f;
    p.del_dmax = 18;
    p.del_init_tokens = 32;
    p.del_every = 1;
    p.sb_tau = 0.8f;
    p.sb_alpha = 1.0f;
    p.sb_depth = 0;
    p.sb_width = 8;
    /* SWIFT's buckets (methods.md 4): 10 / 5 / 3 / 1 children below 0.5 / 0.8 / 0.95 / above */
    const int topk[4] = {10, 5, 3, 1};
    const float conf[3] = {0.5f, 0.8f, 0.95f};
    memcpy(p.tree_topk, topk, sizeof topk);
    memcpy(p.tree_conf, conf, sizeof conf);
    p.n_tree_conf = 3;
    /* SWIFT */
    p.swift_skip_ratio = 0.45f;
    p.swift_window = 32;
    p.swift_opt_steps = 1000;
    p.swift_patience = 300;
    p.swift_bayes_interval = 25;
    p.swift_p_stop = 0.8f;
    p.swift_max_draft = 25;
    p.swift_stop_score = 0.95f;
    /* SpecDec++ */
    p.stop_threshold = 0.3f;
    /* auto */
    p.auto_hysteresis = 0.1f;
    p.auto_decay = 0.97f;
    return p;
}

sd_status sd_vocab_compatible(const sd_model *t, const sd_model *d, sd_error *err) {
    const tokenizer *a = t->tok, *b = d->tok;
    if (a->kind != b->kind)
        return err_set(err, SD_ERR_ARG, "draft and target use different tokenizer types (%s vs %s)",
                       b->kind == TOK_KIND_SPM ? "SentencePiece" : "BPE", a->kind == TOK_KIND_SPM ? "SentencePiece" : "BPE");
    if (a->bos != b->bos || a->eos != b->eos || a->add_bos != b->add_bos)
        return err_set(err, SD_ERR_ARG, "draft and target special tokens differ (BOS %d/%d, EOS %d/%d, add_bos %d/%d)",
                       b->bos, a->bos, b->eos, a->eos, b->add_bos, a->add_bos);
    int diff = a->n_vocab > b->n_vocab ? a->n_vocab - b->n_vocab : b->n_vocab - a->n_vocab;
    if (diff > 128)
        return err_set(err, SD_ERR_ARG, "draft vocabulary (%d tokens) differs from the target's (%d) by more than 128",
                       b->n_vocab, a->n_vocab);
    int n = a->n_vocab < b->n_vocab ? a->n_vocab : b->n_vocab;
    for (int i = 5; i < n; i++)
        if (a->len[i] != b->len[i] || memcmp(a->text[i], b->text[i], (size_t)a->len[i]) != 0)
            return err_set(err, SD_ERR_ARG, "draft and target vocabularies differ at token %d ('%s' vs '%s')", i,
                           b->text[i], a->text[i]);
    return SD_OK;
}

sd_status sd_spec_generate(sd_ctx *target, sd_sampler *smp, const sd_spec_params *sp, const int32_t *prompt,
                           int n_prompt, int n_predict, bool ignore_eos, int32_t *out, int *n_out, sd_token_cb cb,
                           void *user, sd_spec_stats *stats, sd_error *err) {
    if (n_out) *n_out = 0;
    if (!target || !smp || !prompt || !sp) return err_set(err, SD_ERR_ARG, "sd_spec_generate: NULL argument");
    if (n_predict < 0) return err_set(err, SD_ERR_ARG, "number of tokens to predict %d must be >= 0", n_predict);
    sd_session *s = NULL;
    sd_status st = session_new_borrowed(target, smp, sp, 0, n_predict, ignore_eos, &s, err);
    if (!st) st = sd_session_set_prompt(s, prompt, n_prompt, err);
    if (!st) {
        session_set_token_cb(s, cb, user);
        while (!st && !sd_session_done(s)) st = sd_session_step(s, err);
        int n_gen = 0;
        const int32_t *toks = sd_session_tokens(s, &n_gen);
        if (out && n_gen) memcpy(out, toks, (size_t)n_gen * sizeof *out);
        if (n_out) *n_out = n_gen;
        if (stats) sd_session_stats(s, stats);
    }
    sd_session_free(s);
    return st;
}
