/* engine: the draft -> verify (one block forward) -> accept -> roll back -> controller loop. It knows drafters
 * and controllers only through their vtables. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctrl/ctrl.h"
#include "ctrl/del.h"
#include "model/exit_heads.h"
#include "model/model.h"
#include "spec/accept.h"
#include "spec/spec.h"
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

static sd_status check_params(sd_ctx *target, const sd_spec_params *sp, sd_error *err) {
    if (sp->gamma < 1 || sp->gamma > 256)
        return err_set(err, SD_ERR_ARG, "gamma %d: drafts per round must be in [1, 256]", sp->gamma);
    if (sp->gamma_max < 1 || sp->gamma_max > 256)
        return err_set(err, SD_ERR_ARG, "gamma-max %d must be in [1, 256]", sp->gamma_max);
    if (sp->gamma > sd_ctx_n_batch(target) - 1)
        return err_set(err, SD_ERR_ARG, "gamma %d needs a verification block of %d but the context's n_batch is %d",
                       sp->gamma, sp->gamma + 1, sd_ctx_n_batch(target));
    if (!(sp->p_min >= 0 && sp->p_min <= 1)) return err_set(err, SD_ERR_ARG, "p-min %g must be in [0, 1]", sp->p_min);
    if (!(sp->dv_target > 0 && sp->dv_target <= 1) || !(sp->dv_eps >= 0 && sp->dv_eps < 1) ||
        !(sp->dv_theta0 >= 0 && sp->dv_theta0 <= 1))
        return err_set(err, SD_ERR_ARG, "DV parameters out of range (target in (0,1], eps in [0,1), theta0 in [0,1])");
    if (sp->ngram_min < 1 || sp->ngram_max < sp->ngram_min || sp->ngram_max > 64)
        return err_set(err, SD_ERR_ARG, "n-gram sizes %d..%d: need 1 <= min <= max <= 64", sp->ngram_min, sp->ngram_max);
    if (sp->method == SD_SPEC_DRAFT) {
        if (!sp->draft_ctx) return err_set(err, SD_ERR_ARG, "speculative method 'draft' needs a draft model");
        if (sd_ctx_n_batch(sp->draft_ctx) < 1) return err_set(err, SD_ERR_ARG, "draft context has no batch");
        sd_status st = sd_vocab_compatible(sd_ctx_model(target), sd_ctx_model(sp->draft_ctx), err);
        if (st) return st;
    } else if (sp->method == SD_SPEC_SPECBOUND) {
        int L = sd_ctx_model(target)->hp.n_layer;
        if (L < 2) return err_set(err, SD_ERR_ARG, "SpecBound needs a model with at least 2 layers");
        if (!(sp->sb_tau > 0 && sp->sb_tau <= 1)) return err_set(err, SD_ERR_ARG, "SpecBound tau %g must be in (0, 1]", sp->sb_tau);
        if (!(sp->sb_alpha >= 0) || !isfinite(sp->sb_alpha))
            return err_set(err, SD_ERR_ARG, "SpecBound alpha %g must be >= 0", sp->sb_alpha);
        if (sp->sb_depth < 0 || sp->sb_depth >= L)
            return err_set(err, SD_ERR_ARG, "SpecBound depth bound %d must be in [1, %d] (0: 3L/4)", sp->sb_depth, L - 1);
        if (sp->sb_width < 1 || sp->sb_width > 256)
            return err_set(err, SD_ERR_ARG, "SpecBound width bound %d must be in [1, 256]", sp->sb_width);
        if (sp->sb_width > sd_ctx_n_batch(target) - 1)
            return err_set(err, SD_ERR_ARG, "SpecBound width %d needs a block of %d but n_batch is %d", sp->sb_width,
                           sp->sb_width + 1, sd_ctx_n_batch(target));
        if (sp->exit_heads && sp->exit_heads->n_embd != sd_ctx_model(target)->hp.n_embd)
            return err_set(err, SD_ERR_ARG, "exit heads are for another model");
    } else if (sp->method == SD_SPEC_EARLY_EXIT || sp->method == SD_SPEC_DEL) {
        int L = sd_ctx_model(target)->hp.n_layer;
        if (L < 2) return err_set(err, SD_ERR_ARG, "early exit needs a model with at least 2 layers");
        if (sp->exit_layer < 0 || sp->exit_layer >= L)
            return err_set(err, SD_ERR_ARG, "exit layer %d out of range: the draft runs layers [0, E) with 1 <= E <= %d",
                           sp->exit_layer, L - 1);
        if (sp->exit_heads && sp->exit_heads->n_embd != sd_ctx_model(target)->hp.n_embd)
            return err_set(err, SD_ERR_ARG, "exit heads are for another model");
        if (sp->method == SD_SPEC_DEL) {
            if (!(sp->del_omega > 0 && sp->del_omega <= 1)) return err_set(err, SD_ERR_ARG, "DEL omega %g must be in (0, 1]", sp->del_omega);
            if (sp->del_dmax < 1 || sp->del_dmax > 256) return err_set(err, SD_ERR_ARG, "DEL d_max %d must be in [1, 256]", sp->del_dmax);
            if (sp->del_every < 1) return err_set(err, SD_ERR_ARG, "DEL shadow interval %d must be >= 1", sp->del_every);
            if (sp->del_init_tokens < 0) return err_set(err, SD_ERR_ARG, "DEL init tokens %d must be >= 0", sp->del_init_tokens);
            for (int i = 0; sp->del_layers && i < sp->del_n_layers; i++)
                if (sp->del_layers[i] < 1 || sp->del_layers[i] >= L)
                    return err_set(err, SD_ERR_ARG, "DEL candidate depth %d out of range 1..%d", sp->del_layers[i], L - 1);
            if (sp->del_layers && sp->del_n_layers < 1) return err_set(err, SD_ERR_ARG, "DEL needs at least one candidate depth");
        }
    } else if (sp->method != SD_SPEC_NONE && sp->method != SD_SPEC_NGRAM) {
        return err_set(err, SD_ERR_ARG, "unknown speculative method %d", (int)sp->method);
    }
    return SD_OK;
}

sd_status sd_spec_generate(sd_ctx *target, sd_sampler *smp, const sd_spec_params *sp_in, const int32_t *prompt,
                           int n_prompt, int n_predict, bool ignore_eos, int32_t *out, int *n_out, sd_token_cb cb,
                           void *user, sd_spec_stats *stats, sd_error *err) {
    if (n_out) *n_out = 0;
    if (!target || !smp || !prompt || !sp_in) return err_set(err, SD_ERR_ARG, "sd_spec_generate: NULL argument");
    sd_spec_params sp = *sp_in;
    sd_status st = check_params(target, &sp, err);
    if (st) return st;
    if (n_prompt < 1) return err_set(err, SD_ERR_ARG, "the prompt is empty (at least one token is needed)");
    if (n_predict < 0) return err_set(err, SD_ERR_ARG, "number of tokens to predict %d must be >= 0", n_predict);
    const sd_model *m = sd_ctx_model(target);
    const int V = m->hp.n_vocab, n_ctx = sd_ctx_n_ctx(target), n_batch = sd_ctx_n_batch(target);
    if (n_prompt + n_predict > n_ctx)
        return err_set(err, SD_ERR_ARG, "prompt (%d tokens) + tokens to predict (%d) exceed the context (%d)", n_prompt,
                       n_predict, n_ctx);
    int draft_ctx_room = sp.method == SD_SPEC_DRAFT ? sd_ctx_n_ctx(sp.draft_ctx) : n_ctx;
    if (sp.method == SD_SPEC_DRAFT && n_prompt >= draft_ctx_room)
        return err_set(err, SD_ERR_ARG, "the prompt (%d tokens) does not fit the draft model's context (%d)", n_prompt,
                       draft_ctx_room);
    const bool greedy = sd_sampler_is_greedy(smp);
    int gmax = sp.gamma > sp.gamma_max ? sp.gamma : sp.gamma_max;
    if (sp.method == SD_SPEC_DEL && sp.del_dmax > gmax) gmax = sp.del_dmax;
    if (sp.method == SD_SPEC_SPECBOUND) { /* W bounds the round's drafts */
        sp.ctrl = SD_CTRL_FIXED;
        sp.gamma = sp.sb_width;
        if (sp.sb_width > gmax) gmax = sp.sb_width;
    }
    const int cap_hist = n_prompt + n_predict + gmax + 2;
    int32_t *hist = malloc((size_t)cap_hist * sizeof *hist);
    int32_t *drafts = malloc((size_t)(gmax + 1) * sizeof *drafts);
    float *logits = malloc((size_t)(gmax + 1) * V * sizeof *logits);
    float *q = greedy ? NULL : malloc((size_t)gmax * V * sizeof *q);
    float *p = malloc((size_t)V * sizeof *p), *scratch = malloc((size_t)V * sizeof *scratch);
    uint8_t *want = malloc((size_t)gmax + 1);
    del_state *del = sp.method == SD_SPEC_DEL ? del_new(m->hp.n_layer, &sp) : NULL;
    ctrl *c = del ? del_ctrl_new(del) : ctrl_new(&sp);
    drafter *d = NULL;
    if (sp.method == SD_SPEC_DRAFT) d = drafter_model_new(sp.draft_ctx, smp, err);
    else if (sp.method == SD_SPEC_NGRAM) d = drafter_ngram_new(sp.ngram_max, sp.ngram_min);
    else if (sp.method == SD_SPEC_SPECBOUND) d = drafter_bound_new(target, &sp, sp.exit_heads, gmax, err);
    else if (sp.method == SD_SPEC_EARLY_EXIT || (sp.method == SD_SPEC_DEL && del))
        d = drafter_exit_new(target, sp.exit_layer ? sp.exit_layer : m->hp.n_layer / 2, sp.exit_heads, smp, gmax, del,
                             sp.del_init_tokens, err);
    if (!hist || !drafts || !logits || (!greedy && !q) || !p || !scratch || !want || !c ||
        (sp.method != SD_SPEC_NONE && !d) || (sp.method == SD_SPEC_DEL && !del)) {
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
        /* accept a prefix, then one token from the target */
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
            memcpy(hist + n, drafts, (size_t)i * sizeof *hist); /* the penalty's history */
            sd_sampler_probs(smp, li, hist, n + i, p);
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
    if (del && del->n_choices) {
        s.mean_exit = del->exit_sum / del->n_choices;
        s.mean_gamma = del->gamma_sum / del->n_choices;
    }
    if (stats) *stats = s;
    if (n_out) *n_out = n_gen;
done:
    if (d) d->free(d);
    if (c) c->free(c);
    del_free(del);
    free(hist);
    free(drafts);
    free(logits);
    free(q);
    free(p);
    free(scratch);
    free(want);
    return st;
}
