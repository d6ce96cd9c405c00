/* session: one sequence's speculative generation — history, sampler, method (drafter + controller), statistics —
 * advancing in steps: prefill chunks, then rounds of propose (draft a tree, plan its verification) -> verify (one
 * target forward, possibly merged with other sessions') -> accept (accept_tree) -> commit (emit, move the accepted
 * path's K/V into place, roll back the rest, update drafter and controller). */
#define _POSIX_C_SOURCE 200809L
#include "speculative/session.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/model.h"
#include "speculative/accept.h"
#include "speculative/method.h"
#include "speculative/spec.h"
#include "speculative/sv.h"
#include "speculative/sv_companion.h"
#include "util/err.h"

typedef enum { SES_EMPTY, SES_PREFILL, SES_DECODE, SES_DONE } ses_state;

struct sd_session {
    sd_ctx *target;
    const sd_model *m;
    int seq, V, L, n_ctx, n_batch;
    sd_spec_params sp;
    sd_sampler *smp;
    bool own_smp, greedy, ignore_eos;
    int n_predict_param; /* as given (-1 = to the end of the context) */
    spec_method meth;
    int gmax;
    ses_state state;
    sd_status status;
    sd_error err;
    sd_token_cb cb;
    void *cb_user;
    sd_sched *sched; /* the scheduler the session is in, or NULL */
    /* history: hist[0 .. n) = prompt + emitted; room for the round's drafts after it */
    int32_t *hist; /* [n_prompt + n_predict + gmax + 2] */
    int n, n_prompt, n_predict, n_gen, n_read, prefilled;
    /* the round */
    draft_tree tree;  /* token, parent: [gmax]; q: [gmax][V] when sampling */
    int k;            /* nodes drafted this round */
    int32_t *block;   /* [gmax + 1] root + nodes */
    int32_t *bparent; /* [gmax + 1] block parents (trees) */
    int32_t *bpos;    /* [gmax + 1] block positions (trees) */
    int32_t *path;    /* [gmax] accepted nodes */
    int32_t *cells;   /* [gmax + 1] the block cells kept: the root and the accepted path */
    float *logits;    /* [gmax + 1][V] */
    float *p, *scratch; /* [V] */
    verify_plan plan;
    uint8_t *ones;    /* [gmax + 1] want flags: logits of every entry of the verification block */
    enum { R_NONE, R_DRAFTING, R_VERIFY, R_COMPANION, R_SELECT } round;
    fwd_req req;      /* the round's pending forward (a draft forward, then the verification block) */
    double t_round0;  /* when the round's drafting started */
    double t_verify0; /* when drafting ended */
    uint64_t passes0;     /* the target context's layer passes when the round started */
    uint64_t draft_passes; /* the round's passes on the target before its verification (self-drafting, plans) */
    double aux0;
    /* statistics */
    sd_spec_stats stats;
    double t_start, t_decode0;
    /* SV (methods.md 6): the companion, the round's indicators and betas, the drafted count before the cut */
    sv_companion *comp;
    bool sv_on;
    int k_drafted;
    double t_drafted, t_comp_end; /* drafting ended; the companion's stage ended (== t_drafted without one) */
    float *sv_s, *sv_a, *sv_beta; /* [gmax] */
    float *pd, *pc;               /* [V] */
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

sd_session_params sd_session_default_params(void) {
    sd_session_params p;
    memset(&p, 0, sizeof p);
    p.seq = 0;
    p.sampling = sd_sampler_default_params();
    p.spec = sd_spec_default_params();
    p.n_predict = 128;
    p.ignore_eos = false;
    return p;
}

static void round_free(sd_session *s) {
    free(s->tree.token);
    free(s->tree.parent);
    free(s->tree.q);
    free(s->block);
    free(s->bparent);
    free(s->bpos);
    free(s->path);
    free(s->cells);
    free(s->logits);
    free(s->p);
    free(s->scratch);
    free(s->ones);
    free(s->tree.dlogits);
    free(s->sv_s);
    free(s->sv_a);
    free(s->sv_beta);
    free(s->pd);
    free(s->pc);
    svc_free(s->comp);
}

static sd_status session_create(sd_ctx *target, sd_sampler *smp, bool own, const sd_spec_params *sp, int seq,
                                int n_predict, bool ignore_eos, sd_session **out, sd_error *err) {
    *out = NULL;
    sd_status st = method_check(target, sp, err);
    if (st) return st;
    if (seq < 0 || seq >= sd_ctx_n_seq(target))
        return err_set(err, SD_ERR_ARG, "sequence %d: the target context has sequences 0..%d", seq,
                       sd_ctx_n_seq(target) - 1);
    if (method_draft_ctx(sp) && seq >= sd_ctx_n_seq(sp->draft_ctx))
        return err_set(err, SD_ERR_ARG, "sequence %d: the draft model's context has sequences 0..%d", seq,
                       sd_ctx_n_seq(sp->draft_ctx) - 1);
    if (sp->companion_ctx && seq >= sd_ctx_n_seq(sp->companion_ctx))
        return err_set(err, SD_ERR_ARG, "sequence %d: the SV companion's context has sequences 0..%d", seq,
                       sd_ctx_n_seq(sp->companion_ctx) - 1);
    if (n_predict < -1) return err_set(err, SD_ERR_ARG, "number of tokens to predict %d must be >= 0 (-1: to the end of the context)", n_predict);
    sd_session *s = calloc(1, sizeof *s);
    if (!s) return err_set(err, SD_ERR_NOMEM, "out of memory creating a session");
    s->target = target;
    s->m = sd_ctx_model(target);
    s->seq = seq;
    s->V = s->m->hp.n_vocab;
    s->L = s->m->hp.n_layer;
    s->n_ctx = sd_ctx_n_ctx(target);
    s->n_batch = sd_ctx_n_batch(target);
    s->sp = *sp;
    s->smp = smp;
    s->own_smp = own;
    s->greedy = sd_sampler_is_greedy(smp);
    s->ignore_eos = ignore_eos;
    s->n_predict_param = n_predict;
    s->gmax = method_max_drafts(sp);
    const size_t G = (size_t)s->gmax, V = (size_t)s->V;
    s->tree.token = malloc(G * sizeof(int32_t));
    s->tree.parent = malloc(G * sizeof(int32_t));
    s->tree.q = s->greedy ? NULL : malloc(G * V * sizeof(float));
    s->block = malloc((G + 1) * sizeof(int32_t));
    s->bparent = malloc((G + 1) * sizeof(int32_t));
    s->bpos = malloc((G + 1) * sizeof(int32_t));
    s->path = malloc((G + 1) * sizeof(int32_t));
    s->cells = malloc((G + 1) * sizeof(int32_t));
    s->logits = malloc((G + 1) * V * sizeof(float));
    s->p = malloc(V * sizeof(float));
    s->scratch = malloc(V * sizeof(float));
    s->ones = malloc(G + 1);
    if (s->ones) memset(s->ones, 1, G + 1);
    if (!s->ones || !s->tree.token || !s->tree.parent || (!s->greedy && !s->tree.q) || !s->block || !s->bparent || !s->bpos ||
        !s->path || !s->cells || !s->logits || !s->p || !s->scratch) {
        s->own_smp = false;
        sd_session_free(s);
        return err_set(err, SD_ERR_NOMEM, "out of memory creating a session");
    }
    /* SV: the companion runs when SV verifies or when a profile is being recorded */
    if (sp->method != SD_SPEC_NONE && sp->companion_ctx && (sp->verify == SD_VERIFY_SV || sp->sv_record_cb)) {
        s->sv_on = sp->verify == SD_VERIFY_SV;
        s->comp = svc_new(sp->companion_ctx, seq, sp->companion_exit,
                          sd_ctx_model(sp->companion_ctx) == s->m ? sp->exit_heads : NULL, s->gmax, err);
        s->sv_s = malloc(G * sizeof(float));
        s->sv_a = malloc(G * sizeof(float));
        s->sv_beta = malloc(G * sizeof(float));
        s->pd = malloc(V * sizeof(float));
        s->pc = malloc(V * sizeof(float));
        s->tree.dlogits = s->greedy ? malloc(G * V * sizeof(float)) : NULL;
        s->tree.dlogits_V = s->V;
        if (!s->comp || !s->sv_s || !s->sv_a || !s->sv_beta || !s->pd || !s->pc || (s->greedy && !s->tree.dlogits)) {
            s->own_smp = false;
            sd_session_free(s);
            return err_set(err, SD_ERR_NOMEM, "out of memory creating a session's SV companion");
        }
    }
    s->state = SES_EMPTY;
    *out = s;
    return SD_OK;
}

sd_status session_new_borrowed(sd_ctx *target, sd_sampler *smp, const sd_spec_params *sp, int seq, int n_predict,
                               bool ignore_eos, sd_session **out, sd_error *err) {
    if (!target || !smp || !sp || !out) return err_set(err, SD_ERR_ARG, "session: NULL argument");
    return session_create(target, smp, false, sp, seq, n_predict, ignore_eos, out, err);
}

sd_status sd_session_new(sd_ctx *target, const sd_session_params *params, sd_session **out, sd_error *err) {
    if (!target || !params || !out) return err_set(err, SD_ERR_ARG, "sd_session_new: NULL argument");
    *out = NULL;
    sd_sampler *smp = NULL;
    sd_status st = sd_sampler_new(&params->sampling, sd_ctx_model(target)->hp.n_vocab, &smp, err);
    if (st) return st;
    st = session_create(target, smp, true, &params->spec, params->seq, params->n_predict, params->ignore_eos, out, err);
    if (st) sd_sampler_free(smp);
    return st;
}

void session_set_token_cb(sd_session *s, sd_token_cb cb, void *user) {
    s->cb = cb;
    s->cb_user = user;
}

sd_ctx *session_ctx(const sd_session *s) { return s->target; }
int session_seq(const sd_session *s) { return s->seq; }

sd_ctx *session_draft_ctx(const sd_session *s) { return s->meth.d ? s->meth.d->draft_ctx : NULL; }

sd_ctx *session_fwd_ctx(const sd_session *s) {
    return s->round == R_COMPANION ? svc_ctx(s->comp) : session_draft_ctx(s);
}

/* The session's sequence leaves the target's cache and the draft model's (their pages return to the pools). */
static void clear_caches(sd_session *s) {
    sd_kv_truncate(s->target, s->seq, 0, NULL);
    if (session_draft_ctx(s)) sd_kv_truncate(session_draft_ctx(s), s->seq, 0, NULL);
    if (s->comp) svc_clear(s->comp);
}

/* Ends the session (its caches stay until it is cancelled, given a new prompt or freed). */
static void finish(sd_session *s) {
    if (s->state == SES_DONE) return;
    if (s->state == SES_DECODE) {
        double t = now_s();
        s->stats.t_gen_s = t - s->t_decode0;
        if (s->meth.d) s->stats.t_aux_s = s->meth.d->t_aux - s->aux0;
        method_stats(&s->meth, &s->stats);
    }
    s->state = SES_DONE;
}

static void fail(sd_session *s, sd_status st, const sd_error *e) {
    s->status = st ? st : SD_ERR_ARG;
    if (e && e->status) s->err = *e;
    else err_set(&s->err, s->status, "session failed (%s)", sd_status_str(s->status));
    s->err.status = s->status;
    finish(s);
}

sd_status sd_session_set_prompt(sd_session *s, const int32_t *prompt, int n_prompt, sd_error *err) {
    if (!s || (!prompt && n_prompt > 0)) return err_set(err, SD_ERR_ARG, "sd_session_set_prompt: NULL argument");
    if (n_prompt < 1) return err_set(err, SD_ERR_ARG, "the prompt is empty (at least one token is needed)");
    int n_predict = s->n_predict_param < 0 ? s->n_ctx - n_prompt : s->n_predict_param;
    if (n_predict < 0 || n_prompt + n_predict > s->n_ctx)
        return err_set(err, SD_ERR_ARG, "prompt (%d tokens) + tokens to predict (%d) exceed the context (%d)", n_prompt,
                       n_predict, s->n_ctx);
    const int room = method_ctx_room(&s->sp, s->n_ctx);
    if (n_prompt >= room)
        return err_set(err, SD_ERR_ARG, "the prompt (%d tokens) does not fit the draft model's context (%d)", n_prompt,
                       room);
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= s->V)
            return err_set(err, SD_ERR_ARG, "prompt token %d: id %d outside the vocabulary (%d)", i, prompt[i], s->V);
    int cap = n_prompt + n_predict + s->gmax + 2;
    int32_t *h = malloc((size_t)cap * sizeof *h);
    if (!h) return err_set(err, SD_ERR_NOMEM, "out of memory for a prompt of %d tokens", n_prompt);
    /* a fresh method each prompt: controller and drafter state start over, as in a new generation */
    if (s->state != SES_EMPTY) clear_caches(s);
    method_free(&s->meth);
    sd_status st = method_new(s->target, s->seq, s->smp, &s->sp, s->gmax, &s->meth, err);
    if (st) {
        free(h);
        s->state = SES_EMPTY;
        return st;
    }
    free(s->hist);
    s->hist = h;
    memcpy(h, prompt, (size_t)n_prompt * sizeof *h);
    s->n = s->n_prompt = n_prompt;
    s->n_predict = n_predict;
    s->n_gen = s->n_read = s->prefilled = 0;
    s->status = SD_OK;
    memset(&s->err, 0, sizeof s->err);
    memset(&s->stats, 0, sizeof s->stats);
    s->stats.n_prompt = n_prompt;
    s->t_start = 0;
    sd_kv_truncate(s->target, s->seq, 0, NULL);
    s->state = SES_PREFILL;
    s->round = R_NONE; /* a round a failure left half-done is over */
    return SD_OK;
}

bool sd_session_done(const sd_session *s) { return !s || s->state == SES_DONE || s->state == SES_EMPTY; }
bool session_prefilling(const sd_session *s) { return s->state == SES_PREFILL && s->prefilled < s->n - 1; }

/* Cells a round may add after the pending token: in the target's cache, in the draft model's (which holds the
 * pending token too, plus draft_extra more when the last draft is never fed to it), and in one block. */
static int cells_left(const sd_session *s, int draft_extra) {
    int room = s->n_ctx - s->n;
    const int draft = method_ctx_room(&s->sp, s->n_ctx) - s->n + draft_extra;
    if (draft < room) room = draft;
    if (s->n_batch - 1 < room) room = s->n_batch - 1;
    return room;
}

/* The most drafts (depth) this round may hold: a chain's last draft never enters the draft model's cache. */
static int round_max(const sd_session *s) {
    int room = cells_left(s, 1);
    if (s->n_predict - s->n_gen - 1 < room) room = s->n_predict - s->n_gen - 1; /* no use beyond what is emitted */
    int max = s->meth.d ? s->meth.c->max_len(s->meth.c) : 0;
    if (max > room) max = room;
    if (max > s->gmax) max = s->gmax;
    return max < 0 ? 0 : max;
}

int session_need(const sd_session *s) {
    if (sd_session_done(s)) return 0;
    if (session_prefilling(s)) return 1; /* a chunk of any size helps */
    return round_max(s) + 1;
}

/* The drafter learns how many sequences' passes merge with the session's, the others' drafts and their tokens
 * (drafter.batched): committing a round, those of the scheduler's pass it was in; starting, the live sessions
 * (drafts not known). */
static void tell_batch(const sd_session *s, bool in_pass) {
    if (!s->meth.d || !s->meth.d->batched) return;
    int seqs = 1, drafts = 0;
    double per_seq = 1;
    if (s->sched && in_pass) {
        sched_pass_blocks(s->sched, &seqs, &drafts, &per_seq);
        drafts -= s->k; /* the others' */
    } else if (s->sched) {
        seqs = sd_sched_n_live(s->sched);
    }
    if (seqs < 1) seqs = 1;
    s->meth.d->batched(s->meth.d, seqs, drafts, per_seq * (seqs - 1));
}

/* The prompt is in the target's cache: the drafter catches up, decoding starts. */
static bool start_decoding(sd_session *s) {
    sd_error e = {0};
    tell_batch(s, false);
    if (s->meth.d && s->meth.d->begin) {
        sd_status st = s->meth.d->begin(s->meth.d, s->hist, s->n, &e);
        if (st) {
            fail(s, st, &e);
            return false;
        }
    }
    if (s->comp) {
        sd_status st = svc_begin(s->comp, s->hist, s->n, &e);
        if (st) {
            fail(s, st, &e);
            return false;
        }
    }
    s->t_decode0 = now_s();
    s->stats.t_prompt_s = s->t_decode0 - s->t_start;
    s->aux0 = s->meth.d ? s->meth.d->t_aux : 0;
    s->state = SES_DECODE;
    if (s->n_gen >= s->n_predict) finish(s);
    return s->state == SES_DECODE;
}

/* Drafting is over (s->k nodes): plan the verification and describe its block in s->req. */
static bool finish_drafting(sd_session *s) {
    sd_error e = {0};
    drafter *d = s->meth.d;
    s->t_verify0 = now_s();
    s->plan = (verify_plan){0};
    if (d && d->plan) {
        sd_status st = d->plan(d, s->hist, s->n, &s->tree, s->k, &s->plan, &e);
        if (st) {
            fail(s, st, &e);
            return false;
        }
    }
    s->draft_passes = sd_ctx_layer_passes(s->target) - s->passes0;
    const int k = s->k, base = s->n - 1;
    bool chain = true;
    s->block[0] = s->hist[s->n - 1];
    s->bparent[0] = -1;
    s->bpos[0] = base;
    for (int j = 0; j < k; j++) {
        int pa = s->tree.parent[j];
        s->block[j + 1] = s->tree.token[j];
        s->bparent[j + 1] = pa + 1;
        s->bpos[j + 1] = s->bpos[pa + 1] + 1;
        chain &= pa == j - 1;
    }
    s->req = (fwd_req){.seq = s->seq, .layer_begin = s->plan.layer_begin, .n = k + 1,
                       .token = s->plan.layer_begin == 0 ? s->block : NULL, .embd = s->plan.embd,
                       .parent = chain ? NULL : s->bparent, .pos = chain ? NULL : s->bpos, .want = s->ones,
                       .logits = s->logits, .hidden_layers = s->plan.hidden_layers};
    s->round = R_VERIFY;
    return true;
}

/* SV: the companion's distributions are in: the indicators and betas of the round's drafted tokens. */
static void sv_indicators(sd_session *s, const float *clogits) {
    const int V = s->V;
    for (int i = 0; i < s->k; i++) {
        const float *pd = NULL;
        if (!s->tree.onehot && !s->greedy) {
            pd = s->tree.q + (size_t)i * V;
        } else if (s->tree.has_dlogits) {
            spv_softmax(s->tree.dlogits + (size_t)i * V, V, s->pd);
            pd = s->pd;
        }
        const float *cl = clogits + (size_t)i * V;
        if (s->greedy) spv_softmax(cl, V, s->pc);
        else sd_sampler_probs(s->smp, cl, s->hist, s->n + i, s->pc); /* the same processing as q */
        spv_indicators(pd, s->pc, V, s->tree.token[i], &s->sv_s[i], &s->sv_a[i]);
        s->sv_beta[i] = s->sp.sv_profile ? sd_sv_profile_beta(s->sp.sv_profile, s->sv_s[i], s->sv_a[i]) : 1.0f;
    }
}

/* Drafting is over (s->k nodes): the companion's forward (SV), the choice of the verification length, or the plan. */
static fwd_kind drafted(sd_session *s) {
    s->k_drafted = s->k;
    s->t_drafted = s->t_comp_end = now_s();
    if (s->comp && s->k > 0) {
        svc_request(s->comp, s->hist, s->n, s->tree.token, s->k, &s->req);
        s->round = R_COMPANION;
        return FWD_DRAFT;
    }
    return finish_drafting(s) ? FWD_TARGET : FWD_NONE;
}

int session_sv_betas(const sd_session *s, const float **beta) {
    *beta = s->sv_beta;
    return s->k;
}

sd_sv_latency *session_sv_latency(const sd_session *s) { return s->sp.sv_latency; }

sd_sv_latency *session_live_latency(const sd_session *s) {
    return s->sv_on || (s->sp.method == SD_SPEC_SWIFT && s->sp.tree_nodes < 0) ? s->sp.sv_latency : NULL;
}

sd_sv_latency *session_batch_latency(const sd_session *s) {
    return s->sp.method == SD_SPEC_AUTO ? s->sp.sv_latency : session_live_latency(s);
}

void session_sv_verify(sd_session *s, int n) {
    if (s->round != R_SELECT) return;
    if (n < s->k) s->k = n < 1 ? 1 : n;
    finish_drafting(s);
}

/* Starts a round: drafting runs here (alone), or its first forward on the draft context is described in s->req. */
static fwd_kind start_round(sd_session *s) {
    sd_error e = {0};
    drafter *d = s->meth.d;
    const int max = round_max(s);
    s->t_round0 = now_s();
    s->passes0 = sd_ctx_layer_passes(s->target);
    for (int i = 0; i < s->gmax; i++) s->tree.parent[i] = i - 1;
    s->tree.onehot = true;
    s->tree.has_dlogits = false;
    /* tree nodes: every node takes a cell in the target's cache and in the draft's */
    int cells = cells_left(s, 0);
    if (s->gmax < cells) cells = s->gmax;
    s->tree.max_nodes = cells < 0 ? 0 : cells;
    s->k = 0;
    if (d && d->draft_start) { /* one forward at a time, for the scheduler to merge */
        int st = d->draft_start(d, s->hist, s->n, max, s->meth.c, &s->tree, &s->req, &s->k, &e);
        if (st < 0) {
            fail(s, e.status, &e);
            return FWD_NONE;
        }
        if (st == 1) {
            s->round = R_DRAFTING;
            return FWD_DRAFT;
        }
    } else if (d) { /* also with max == 0: a drafter may have per-round state to reset */
        int k = d->draft(d, s->hist, s->n, max, s->meth.c, &s->tree, &e);
        if (k < 0) {
            fail(s, e.status, &e);
            return FWD_NONE;
        }
        s->k = k;
    }
    return drafted(s);
}

fwd_kind session_next(sd_session *s, int budget, fwd_req *r) {
    if (!s || s->state == SES_DONE || s->state == SES_EMPTY) return FWD_NONE;
    if (s->state == SES_PREFILL) {
        if (s->t_start == 0) s->t_start = now_s();
        /* prefill all but the newest token: it is the first entry of the first verification block */
        int left = s->n - 1 - s->prefilled;
        if (left > 0) {
            int c = left < budget ? left : budget;
            if (c > s->n_batch) c = s->n_batch;
            if (c < 1) return FWD_NONE;
            *r = (fwd_req){.seq = s->seq, .n = c, .token = s->hist + s->prefilled};
            return FWD_TARGET;
        }
        if (!start_decoding(s)) return FWD_NONE;
    }
    fwd_kind k = s->round == R_NONE                                   ? start_round(s)
                 : s->round == R_DRAFTING || s->round == R_COMPANION ? FWD_DRAFT
                 : s->round == R_SELECT                              ? FWD_SELECT
                                                                     : FWD_TARGET;
    if (k != FWD_NONE) *r = s->req;
    return k;
}

/* Emits the accepted path and the target's token, stopping at EOS / n_predict / the callback; returns how many. */
static int emit(sd_session *s, int acc, int32_t next) {
    int emitted = 0;
    bool stop = false;
    for (int i = 0; i <= acc && !stop; i++) {
        int32_t t = i < acc ? s->tree.token[s->path[i]] : next;
        s->hist[s->n++] = t;
        s->n_gen++;
        emitted++;
        if (s->cb && !s->cb(t, s->cb_user)) stop = true;
        if (!s->ignore_eos && sd_token_is_eog(s->m, t)) stop = true;
        if (s->n_gen >= s->n_predict) stop = true;
    }
    if (stop) finish(s);
    return emitted;
}

static void commit_round(sd_session *s, const fwd_req *r) {
    drafter *d = s->meth.d;
    const int k = s->k, base = s->n - 1;
    double tc = now_s();
    if (d && d->verified) d->verified(d, s->logits, k);
    int32_t next;
    int acc = accept_tree(&s->tree, k, s->logits, s->V, s->smp, s->hist, s->n, s->p, s->scratch, s->path, &next, NULL);
    /* the cells to keep: the root, then the accepted path (moved into place when it is not a prefix) */
    bool prefix = true;
    for (int i = 0; i < acc; i++) prefix &= s->path[i] == i;
    if (!prefix) {
        s->cells[0] = 0;
        for (int i = 0; i < acc; i++) s->cells[i + 1] = s->path[i] + 1;
        sd_kv_keep(s->target, s->seq, base, s->cells, acc + 1, NULL);
        s->stats.n_branch_rounds++;
    }
    const int emitted = emit(s, acc, next);
    /* roll back: the target keeps everything but the new pending token (the old pending token and the accepted
     * drafts; the rejected nodes' entries go) */
    sd_kv_truncate(s->target, s->seq, s->n - 1, NULL);
    if (d && d->timed && !s->sched)
        d->timed(d, (s->t_drafted - s->t_round0) + (s->t_verify0 - s->t_comp_end), tc - s->t_verify0);
    tell_batch(s, true);
    if (d && d->on_verified) d->on_verified(d, s->hist, s->n, acc);
    if (s->comp) {
        svc_on_verified(s->comp, s->n);
        if (s->sp.sv_record_cb) /* the tokens whose acceptance was decided: the accepted ones and the first rejected */
            for (int i = 0; i < k && i <= acc; i++) s->sp.sv_record_cb(s->sv_s[i], s->sv_a[i], i < acc, s->sp.sv_record_user);
    }
    s->meth.c->on_verified(s->meth.c, k, acc);
    if (s->state == SES_DONE && d) { /* the round that ended the session is in the method's statistics now */
        s->stats.t_aux_s = d->t_aux - s->aux0;
        method_stats(&s->meth, &s->stats);
    }
    sd_spec_stats *st = &s->stats;
    st->n_gen = s->n_gen;
    st->n_rounds++;
    st->n_drafted += s->k_drafted;
    st->n_verified += k;
    st->n_accepted += acc;
    /* drafting: the drafter's steps and its plan (e.g. early exit's last shallow pass); SV's companion apart */
    st->t_draft_s += (s->t_drafted - s->t_round0) + (s->t_verify0 - s->t_comp_end);
    st->t_companion_s += s->t_comp_end - s->t_drafted;
    st->t_verify_s += tc - s->t_verify0;
    st->layer_passes += s->draft_passes;                              /* the drafter's own passes */
    st->layer_passes += (uint64_t)(s->L - r->layer_begin);           /* and the verification pass */
    if (s->sp.round_cb) {
        sd_spec_round rd = {k, acc, emitted, sd_kv_len(s->target, s->seq, -1)};
        if (!s->sp.round_cb(&rd, s->sp.round_user)) finish(s);
    }
}

void session_forward_done(sd_session *s, fwd_req *r) {
    if (!s || s->state == SES_DONE) return;
    if (s->state == SES_DECODE && s->round == R_DRAFTING) {
        sd_error e = {0};
        int st = s->meth.d->draft_next(s->meth.d, r, &s->k, &e);
        if (st < 0) fail(s, e.status, &e);
        else if (st == 1) s->req = *r;
        else drafted(s);
        return;
    }
    if (s->state == SES_DECODE && s->round == R_COMPANION) {
        const float *cl = svc_done(s->comp, r);
        if (!cl) {
            sd_error e = r->err;
            err_prefix(&e, "SV companion: ");
            fail(s, r->status, &e);
            return;
        }
        sv_indicators(s, cl);
        s->t_comp_end = now_s();
        if (s->sv_on) s->round = R_SELECT; /* the verification length: session_sv_verify (a scheduler's choice) */
        else finish_drafting(s);
        return;
    }
    if (r->status) {
        fail(s, r->status, &r->err);
        return;
    }
    if (s->state == SES_PREFILL) {
        s->prefilled += r->n;
        if (s->prefilled == s->n - 1) start_decoding(s);
        return;
    }
    s->round = R_NONE;
    commit_round(s, r);
}

sd_status sd_session_step(sd_session *s, sd_error *err) {
    if (!s) return err_set(err, SD_ERR_ARG, "sd_session_step: NULL session");
    if (s->state == SES_EMPTY) return err_set(err, SD_ERR_ARG, "sd_session_step: the session has no prompt");
    fwd_req r;
    fwd_kind k;
    while ((k = session_next(s, s->n_batch, &r)) == FWD_DRAFT || k == FWD_SELECT) {
        if (k == FWD_SELECT) { /* SV alone: the single-sequence rule */
            const float *beta;
            int kd = session_sv_betas(s, &beta), n = kd;
            sd_sv_select(s->sp.sv_latency, beta, kd, &kd, 1, 0, 0, 0, &n);
            session_sv_verify(s, n);
            continue;
        }
        fwd_req_run(session_fwd_ctx(s), &r);
        session_forward_done(s, &r);
    }
    if (k == FWD_TARGET) {
        const bool verify = s->state == SES_DECODE && session_live_latency(s);
        double t0 = now_s();
        fwd_req_run(s->target, &r);
        if (verify && !r.status) sd_sv_latency_observe(s->sp.sv_latency, r.n - 1, 1, now_s() - t0, 0.9);
        session_forward_done(s, &r);
    }
    return sd_session_status(s, err);
}

int sd_session_read(sd_session *s, int32_t *out, int cap) {
    if (!s || !out || cap <= 0) return 0;
    int k = s->n_gen - s->n_read;
    if (k > cap) k = cap;
    memcpy(out, s->hist + s->n_prompt + s->n_read, (size_t)k * sizeof *out);
    s->n_read += k;
    return k;
}

const int32_t *sd_session_tokens(const sd_session *s, int *n) {
    if (n) *n = s && s->hist ? s->n_gen : 0;
    return s && s->hist ? s->hist + s->n_prompt : NULL;
}

void sd_session_cancel(sd_session *s) {
    if (!s || s->state == SES_DONE) return;
    finish(s);
    clear_caches(s);
}

sd_status sd_session_status(const sd_session *s, sd_error *err) {
    if (!s) return err_set(err, SD_ERR_ARG, "NULL session");
    if (s->status && err) *err = s->err;
    return s->status;
}

void sd_session_stats(const sd_session *s, sd_spec_stats *stats) {
    if (!s || !stats) return;
    *stats = s->stats;
    stats->n_gen = s->n_gen;
}

void session_set_sched(sd_session *s, sd_sched *sc) { s->sched = sc; }
sd_sched *session_sched(const sd_session *s) { return s->sched; }

void sd_session_free(sd_session *s) {
    if (!s) return;
    if (s->sched) sd_sched_remove(s->sched, s); /* a freed session never stays in a scheduler */
    if (s->state != SES_EMPTY) clear_caches(s);
    method_free(&s->meth);
    if (s->own_smp) sd_sampler_free(s->smp);
    round_free(s);
    free(s->hist);
    free(s);
}
