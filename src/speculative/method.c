#include "speculative/method.h"

#include <stdlib.h>
#include <string.h>

#include "ctrl/del.h"
#include "model/model.h"
#include "speculative/registry.h"
#include "util/err.h"

/* The registry's checks (values, the models) and the context's limits: one set of rules for every caller. */
sd_status method_check(sd_ctx *target, const sd_spec_params *sp, sd_error *err) {
    return sd_spec_check_ctx(target, sp, err);
}

int method_max_drafts(const sd_spec_params *sp) {
    int g = sp->gamma > sp->gamma_max ? sp->gamma : sp->gamma_max;
    if (sp->method == SD_SPEC_DEL && sp->del_dmax > g) g = sp->del_dmax;
    if (sp->method == SD_SPEC_SPECBOUND && sp->sb_width > g) g = sp->sb_width;
    if (sp->tree_nodes > g) g = sp->tree_nodes;
    if (sp->tree_nodes < 0 && SD_TREE_AUTO_MAX > g) g = SD_TREE_AUTO_MAX; /* SWIFT's automatic budget */
    if (sp->method == SD_SPEC_SWIFT && sp->swift_max_draft > g) g = sp->swift_max_draft;
    return g;
}

int sd_spec_max_drafts(const sd_spec_params *sp) { return sp ? method_max_drafts(sp) : 0; }
bool sd_spec_uses(const sd_spec_params *sp, sd_spec_method m) {
    return sp->method == m || (sp->method == SD_SPEC_AUTO && (registry_auto_pool(NULL, NULL, sp) & SD_MASK(m)));
}
sd_ctx *method_draft_ctx(const sd_spec_params *sp) { return sd_spec_uses(sp, SD_SPEC_DRAFT) ? sp->draft_ctx : NULL; }

int method_ctx_room(const sd_spec_params *sp, int target_n_ctx) {
    return method_draft_ctx(sp) ? sd_ctx_n_ctx(sp->draft_ctx) : target_n_ctx;
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
    case SD_SPEC_AUTO: /* the pool of candidates and its controller view (max_len = the chosen gamma) */
        m->d = drafter_auto_new(target, seq, smp, sp, gmax, &m->c, err);
        m->autod = m->d != NULL;
        if (!m->d) return err && err->status ? err->status : SD_ERR_NOMEM;
        break;
    case SD_SPEC_SWIFT:
        /* chains stop on SWIFT's confidence rule — conf-stop at p_stop — or, with ctrl=specdecpp, on the acceptance
         * head instead; both bounded by max_draft (trees: the chain of the tree stops on p_stop) */
        if (sp->ctrl != SD_CTRL_SPECDECPP) cp.ctrl = SD_CTRL_CONF, cp.p_min = sp->swift_p_stop;
        cp.gamma_max = sp->swift_max_draft;
        m->d = drafter_swift_new(target, seq, smp, sp, err);
        m->swift = m->d != NULL;
        if (!m->d) {
            method_free(m);
            return err && err->status ? err->status : SD_ERR_NOMEM;
        }
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
    if (m->swift) drafter_swift_stats(m->d, s);
    if (m->autod) drafter_auto_stats(m->d, s);
}

void method_free(spec_method *m) {
    if (m->d) m->d->free(m->d);
    if (m->c) m->c->free(m->c);
    del_free(m->del);
    memset(m, 0, sizeof *m);
}
