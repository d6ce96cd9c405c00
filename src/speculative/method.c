#include "speculative/method.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl/del.h"
#include "model/exit_heads.h"
#include "model/model.h"
#include "util/err.h"

sd_status method_check(sd_ctx *target, const sd_spec_params *sp, sd_error *err) {
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
    if (sp->exit_heads && sp->exit_heads->n_embd != sd_ctx_model(target)->hp.n_embd)
        return err_set(err, SD_ERR_ARG, "exit heads are for another model");
    if (sp->tree_nodes < 0 || sp->tree_nodes > 256)
        return err_set(err, SD_ERR_ARG, "tree nodes %d must be in [0, 256] (0: chains)", sp->tree_nodes);
    if (sp->tree_nodes > 0) {
        if (sp->method != SD_SPEC_DRAFT) return err_set(err, SD_ERR_ARG, "token trees need the draft-model method");
        if (sp->tree_nodes > sd_ctx_n_batch(target) - 1)
            return err_set(err, SD_ERR_ARG, "a tree of %d nodes needs a verification block of %d but n_batch is %d",
                           sp->tree_nodes, sp->tree_nodes + 1, sd_ctx_n_batch(target));
        if (sp->n_tree_conf < 0 || sp->n_tree_conf > 7)
            return err_set(err, SD_ERR_ARG, "%d tree confidence bounds (0..7 allowed)", sp->n_tree_conf);
        for (int i = 0; i <= sp->n_tree_conf; i++)
            if (sp->tree_topk[i] < 1 || sp->tree_topk[i] > 64)
                return err_set(err, SD_ERR_ARG, "tree top-k %d (bucket %d) must be in [1, 64]", sp->tree_topk[i], i);
        for (int i = 0; i < sp->n_tree_conf; i++)
            if (!(sp->tree_conf[i] > 0 && sp->tree_conf[i] <= 1) || (i > 0 && !(sp->tree_conf[i] > sp->tree_conf[i - 1])))
                return err_set(err, SD_ERR_ARG, "tree confidence bounds must ascend within (0, 1] (bound %d: %g)", i,
                               sp->tree_conf[i]);
    }
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
    } else if (sp->method == SD_SPEC_EARLY_EXIT || sp->method == SD_SPEC_DEL) {
        int L = sd_ctx_model(target)->hp.n_layer;
        if (L < 2) return err_set(err, SD_ERR_ARG, "early exit needs a model with at least 2 layers");
        if (sp->exit_layer < 0 || sp->exit_layer >= L)
            return err_set(err, SD_ERR_ARG, "exit layer %d out of range: the draft runs layers [0, E) with 1 <= E <= %d",
                           sp->exit_layer, L - 1);
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

int method_max_drafts(const sd_spec_params *sp) {
    int g = sp->gamma > sp->gamma_max ? sp->gamma : sp->gamma_max;
    if (sp->method == SD_SPEC_DEL && sp->del_dmax > g) g = sp->del_dmax;
    if (sp->method == SD_SPEC_SPECBOUND && sp->sb_width > g) g = sp->sb_width;
    if (sp->tree_nodes > g) g = sp->tree_nodes;
    return g;
}

int method_ctx_room(const sd_spec_params *sp, int target_n_ctx) {
    return sp->method == SD_SPEC_DRAFT ? sd_ctx_n_ctx(sp->draft_ctx) : target_n_ctx;
}

sd_status method_new(sd_ctx *target, int seq, sd_sampler *smp, const sd_spec_params *sp, int gmax, spec_method *m,
                     sd_error *err) {
    memset(m, 0, sizeof *m);
    const int L = sd_ctx_model(target)->hp.n_layer;
    sd_spec_params cp = *sp;
    switch (sp->method) {
    case SD_SPEC_NONE: break;
    case SD_SPEC_DRAFT: m->d = drafter_model_new(sp->draft_ctx, seq, smp, sp, err); break;
    case SD_SPEC_NGRAM: m->d = drafter_ngram_new(sp->ngram_max, sp->ngram_min); break;
    case SD_SPEC_SPECBOUND:
        /* the drafter decides where a round ends; the controller only bounds the width */
        cp.ctrl = SD_CTRL_FIXED;
        cp.gamma = sp->sb_width;
        m->d = drafter_bound_new(target, seq, sp, sp->exit_heads, gmax, err);
        break;
    case SD_SPEC_DEL: /* the early-exit drafter feeding DEL's statistics, which also drive the controller */
        if (!(m->del = del_new(L, sp)) || !(m->c = del_ctrl_new(m->del))) break;
        m->d = drafter_exit_new(target, seq, L / 2, sp->exit_heads, smp, gmax, m->del, sp->del_init_tokens, err);
        break;
    case SD_SPEC_EARLY_EXIT:
        m->d = drafter_exit_new(target, seq, sp->exit_layer ? sp->exit_layer : L / 2, sp->exit_heads, smp, gmax, NULL, 0, err);
        break;
    }
    if (!m->c && sp->method != SD_SPEC_DEL) m->c = ctrl_new(&cp);
    if (!m->c || (sp->method != SD_SPEC_NONE && !m->d)) {
        method_free(m);
        return err_set(err, SD_ERR_NOMEM, "out of memory creating the speculative method");
    }
    return SD_OK;
}

void method_stats(const spec_method *m, sd_spec_stats *s) {
    if (m->del && m->del->n_choices) {
        s->mean_exit = m->del->exit_sum / m->del->n_choices;
        s->mean_gamma = m->del->gamma_sum / m->del->n_choices;
    }
}

void method_free(spec_method *m) {
    if (m->d) m->d->free(m->d);
    if (m->c) m->c->free(m->c);
    del_free(m->del);
    memset(m, 0, sizeof *m);
}
