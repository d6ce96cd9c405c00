/* engine: the draft -> verify (one block forward) -> accept -> roll back -> controller loop. It knows drafters
 * and controllers only through their vtables. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/model.h"
#include "speculative/accept.h"
#include "speculative/method.h"
#include "speculative/spec.h"
#include "util/err.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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

sd_status sd_spec_generate(sd_ctx *target, sd_sampler *smp, const sd_spec_params *sp_in, const int32_t *prompt,
                           int n_prompt, int n_predict, bool ignore_eos, int32_t *out, int *n_out, sd_token_cb cb,
                           void *user, sd_spec_stats *stats, sd_error *err) {
    if (n_out) *n_out = 0;
    if (!target || !smp || !prompt || !sp_in) return err_set(err, SD_ERR_ARG, "sd_spec_generate: NULL argument");
    const sd_spec_params sp = *sp_in;
    sd_status st = method_check(target, &sp, err);
    if (st) return st;
    if (n_prompt < 1) return err_set(err, SD_ERR_ARG, "the prompt is empty (at least one token is needed)");
    if (n_predict < 0) return err_set(err, SD_ERR_ARG, "number of tokens to predict %d must be >= 0", n_predict);
    const sd_model *m = sd_ctx_model(target);
    const int V = m->hp.n_vocab, n_ctx = sd_ctx_n_ctx(target), n_batch = sd_ctx_n_batch(target);
    if (n_prompt + n_predict > n_ctx)
        return err_set(err, SD_ERR_ARG, "prompt (%d tokens) + tokens to predict (%d) exceed the context (%d)", n_prompt,
                       n_predict, n_ctx);
    const int draft_ctx_room = method_ctx_room(&sp, n_ctx);
    if (n_prompt >= draft_ctx_room)
        return err_set(err, SD_ERR_ARG, "the prompt (%d tokens) does not fit the draft model's context (%d)", n_prompt,
                       draft_ctx_room);
    const bool greedy = sd_sampler_is_greedy(smp);
    const int gmax = method_max_drafts(&sp);
    const int cap_hist = n_prompt + n_predict + gmax + 2;
    int32_t *hist = malloc((size_t)cap_hist * sizeof *hist);
    int32_t *drafts = malloc((size_t)(gmax + 1) * sizeof *drafts);
    float *logits = malloc((size_t)(gmax + 1) * V * sizeof *logits);
    float *q = greedy ? NULL : malloc((size_t)gmax * V * sizeof *q);
    float *p = malloc((size_t)V * sizeof *p), *scratch = malloc((size_t)V * sizeof *scratch);
    uint8_t *want = malloc((size_t)gmax + 1);
    spec_method meth;
    st = method_new(target, smp, &sp, gmax, &meth, err);
    if (st) goto done;
    drafter *d = meth.d; /* NULL: plain decoding through the loop */
    ctrl *c = meth.c;
    if (!hist || !drafts || !logits || (!greedy && !q) || !p || !scratch || !want) {
        st = err_set(err, SD_ERR_NOMEM, "out of memory");
        goto done;
    }
    memset(want, 1, (size_t)gmax + 1);
    memcpy(hist, prompt, (size_t)n_prompt * sizeof *hist);
    int n = n_prompt, n_gen = 0;
    sd_spec_stats s = {0};
    s.n_prompt = n_prompt;
    double t0 = now_s();
    /* prefill all but the newest token: it is the first entry of the first verification block */
    sd_kv_truncate(target, 0, 0, NULL);
    for (int i = 0; i < n - 1 && !st; i += n_batch) {
        int k = n - 1 - i < n_batch ? n - 1 - i : n_batch;
        st = sd_forward(target, &(sd_block){.n = k, .token = hist + i}, &(sd_forward_args){0}, err);
    }
    if (!st && d) st = d->begin(d, hist, n, err);
    double t1 = now_s();
    s.t_prompt_s = t1 - t0;
    uint64_t passes1 = sd_ctx_layer_passes(target);
    double aux0 = d ? d->t_aux : 0;
    bool stop = false;
    while (!st && !stop && n_gen < n_predict) {
        const int L = n - 1; /* target cache length */
        int room = n_ctx - L - 1;                      /* drafts that fit the target's context */
        if (draft_ctx_room - (n - 1) < room) room = draft_ctx_room - (n - 1); /* and the draft's */
        if (n_predict - n_gen - 1 < room) room = n_predict - n_gen - 1;  /* no use beyond what is emitted */
        if (n_batch - 1 < room) room = n_batch - 1;
        int max = d ? c->max_len(c) : 0;
        if (max > room) max = room;
        if (max > gmax) max = gmax;
        int k = 0;
        bool onehot = true;
        double ta = now_s();
        if (d) { /* also with max == 0: a drafter may have per-round state to reset */
            k = d->draft(d, hist, n, max, c, drafts, q, &onehot, err);
            if (k < 0) {
                st = err ? err->status : SD_ERR_ARG;
                break;
            }
        }
        double tb = now_s();
        /* verify: [pending, d_1..d_k] in one block, logits everywhere */
        if (d && d->verify) {
            st = d->verify(d, hist, n, drafts, k, logits, err);
        } else {
            int32_t blk[257];
            blk[0] = hist[n - 1];
            memcpy(blk + 1, drafts, (size_t)k * sizeof *blk);
            st = sd_forward(target, &(sd_block){.n = k + 1, .token = blk},
                            &(sd_forward_args){.want_logits = want, .logits = logits}, err);
        }
        if (st) break;
        double tc = now_s();
        /* accept a prefix, then one token from the target; the drafts follow hist (the penalty's history) */
        memcpy(hist + n, drafts, (size_t)k * sizeof *hist);
        int acc = 0;
        int32_t next = -1;
        for (int i = 0; i <= k; i++) {
            const float *li = logits + (size_t)i * V;
            if (greedy) {
                int32_t best = accept_argmax(li, V);
                if (i < k && drafts[i] == best) {
                    acc++;
                    continue;
                }
                next = best;
                break;
            }
            sd_sampler_probs(smp, li, hist, n + i, p); /* history: hist + the drafts before position i */
            if (i == k) { /* all drafts accepted: the bonus token */
                next = sd_sampler_draw(smp, p);
                break;
            }
            int32_t repl;
            if (accept_sample(p, onehot ? NULL : q + (size_t)i * V, drafts[i], V, sd_sampler_uniform(smp), smp,
                              scratch, &repl, NULL)) {
                acc++;
                continue;
            }
            next = repl;
            break;
        }
        /* emit the accepted drafts and the target's token, stopping at EOS / n_predict */
        int emitted = 0;
        for (int i = 0; i <= acc && !stop; i++) {
            int32_t t = i < acc ? drafts[i] : next;
            hist[n++] = t;
            if (out) out[n_gen] = t;
            n_gen++;
            emitted++;
            if (cb && !cb(t, user)) stop = true;
            if (!ignore_eos && sd_token_is_eog(m, t)) stop = true;
            if (n_gen >= n_predict) stop = true;
        }
        /* roll back: the target keeps everything but the new pending token (the old pending token and the
         * accepted drafts; the rejected drafts' entries go) */
        sd_kv_truncate(target, 0, n - 1, NULL);
        if (d) d->on_verified(d, hist, n, acc);
        c->on_verified(c, k, acc);
        s.n_rounds++;
        s.n_drafted += k;
        s.n_accepted += acc;
        s.t_draft_s += tb - ta;
        s.t_verify_s += tc - tb;
        if (sp.round_cb) {
            sd_spec_round r = {k, acc, emitted, sd_kv_len(target, 0, -1)};
            if (!sp.round_cb(&r, sp.round_user)) stop = true;
        }
    }
    s.n_gen = n_gen;
    s.t_gen_s = now_s() - t1;
    s.layer_passes = sd_ctx_layer_passes(target) - passes1;
    if (d) s.t_aux_s = d->t_aux - aux0;
    method_stats(&meth, &s);
    if (stats) *stats = s;
    if (n_out) *n_out = n_gen;
done:
    method_free(&meth);
    free(hist);
    free(drafts);
    free(logits);
    free(q);
    free(p);
    free(scratch);
    free(want);
    return st;
}
