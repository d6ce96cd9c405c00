/* accept_train: trains SpecDec++'s acceptance head (sd_train_accept_head in specdec.h; methods.md 5).
 * Data, per corpus story: a prefix of it is the prompt X (a seeded random cut between prompt_len and 8 prompt_len
 * tokens; a prompt equal to an earlier one is skipped: corpora of stories often share their first words, and greedy
 * answers to equal prompts are equal, so held-out positions would repeat training ones); the target samples a
 * response Y (temperature
 * temp) and keeps p_t = its distribution at each response position; the drafter runs once over [X, Y] for q_t, and
 * a draft token d_t ~ q_t gets the soft label min(1, p_t(d_t) / q_t(d_t)) (its acceptance probability) and the
 * baseline score max q_t (the draft's top-1 probability). Token mixing: Z_t = Y_t with probability mix, else d_t; the
 * drafter runs over [X, Z] and the state at each drafted position (the one that has read d_t) is the head's input
 * for d_t's label; kept target positions get no loss. Examples are split in order (whole stories, mostly) into
 * training, validation and held-out parts. Training: weighted BCE (w_rej on the rejection class), AdamW, minibatches
 * in a seeded order; the epoch with the best validation loss is kept. Everything is deterministic for a seed. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/accept_head.h"
#include "model/exit_heads.h"
#include "model/model.h"
#include "sample/rng.h"
#include "train/train_common.h"
#include "util/err.h"

sd_accept_train_params sd_accept_train_default_params(void) {
    sd_accept_train_params p = {0};
    p.n_tokens = 24000;
    p.prompt_len = 8;
    p.response_len = 96;
    p.blocks = 3;
    p.w_rej = 6.0f;
    p.mix = 0.15f;
    p.temp = 1.0f;
    p.epochs = 6;
    p.batch = 64;
    p.lr = 3e-3f;
    p.weight_decay = 0.01f;
    p.seed = 1;
    return p;
}

static void say(const sd_accept_train_params *tp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const sd_accept_train_params *tp, const char *fmt, ...) {
    if (!tp->progress) return;
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    tp->progress(tp->user, line);
}

/* ------------------------------------------------------------------ the drafter's forward passes */
typedef struct src {
    sd_ctx *ctx;    /* the draft model's context, or a second context of the target (early exit) */
    int E;          /* layers run: the draft model's n_layer, the exit layer, or the target's n_layer (SWIFT) */
    const sd_exit_heads *heads;
    const uint8_t *skip; /* SWIFT: [2 n_layer] sub-layers skipped, else NULL */
    int D, V, nb;
    uint8_t *want;  /* [nb] all ones */
} src;

/* tok[0..n) from an empty cache: logits [n][V] (NULL: none) and states after layer E-1 [n][D] (the drafters' feature:
 * the same forward as drafting, so the same bits). */
static sd_status src_run(const src *s, const int32_t *tok, int n, float *logits, float *hidden, sd_error *err) {
    sd_kv_truncate(s->ctx, 0, 0, NULL);
    for (int i = 0; i < n; i += s->nb) {
        int k = n - i < s->nb ? n - i : s->nb;
        sd_forward_args a = {.layer_end = s->E, .skip = s->skip, .want_logits = s->want,
                             .logits = logits ? logits + (size_t)i * s->V : NULL,
                             .hidden = hidden + (size_t)i * s->D, .exit_heads = s->heads};
        sd_status st = sd_forward(s->ctx, &(sd_block){.n = k, .token = tok + i}, &a, err);
        if (st) return st;
    }
    return SD_OK;
}

/* softmax(z / T) into p; T = 0: one-hot on the argmax (lowest id on ties), the greedy limit. Returns the largest
 * probability of softmax(z / T) (T = 0: of softmax(z), the top-1 probability a greedy drafter reports). */
static float softmax_t(const float *z, int V, float T, float *p) {
    int am = 0;
    for (int v = 1; v < V; v++) am = z[v] > z[am] ? v : am;
    const float mx = z[am], t = T > 0 ? T : 1.0f;
    double s = 0;
    for (int v = 0; v < V; v++) s += (p[v] = expf((z[v] - mx) / t));
    float best = (float)(1.0 / s);
    if (T > 0) {
        for (int v = 0; v < V; v++) p[v] = (float)(p[v] / s);
    } else {
        memset(p, 0, (size_t)V * sizeof *p);
        p[am] = 1.0f;
    }
    return best;
}

static int32_t draw(rng *r, const float *p, int V) {
    double u = rng_uniform(r), c = 0;
    for (int v = 0; v < V; v++)
        if ((c += p[v]) > u) return v;
    for (int v = V - 1; v > 0; v--) /* rounding: the last token with mass */
        if (p[v] > 0) return v;
    return 0;
}

/* ------------------------------------------------------------------ the examples */
typedef struct examples {
    int n, cap, D;
    float *feat;  /* [cap][D] */
    float *label; /* [cap] soft acceptance */
    float *top1;  /* [cap] the draft's top-1 probability */
} examples;

/* One story: prompt = seq[0..plen), response by the target; appends its drafted positions. */
static sd_status story_examples(sd_ctx *tctx, const src *s, const sd_model *target, const sd_accept_train_params *tp,
                                const int32_t *prompt, int plen, rng *r, int32_t *tok, int32_t *mixed, float *P,
                                float *Q, float *H, float *pr, int *pos, examples *ex, sd_error *err) {
    const int V = s->V, D = s->D, R = tp->response_len;
    /* the target's response and its distributions p_t */
    sd_kv_truncate(tctx, 0, 0, NULL);
    memcpy(tok, prompt, (size_t)plen * sizeof *tok);
    int n = plen, nb = sd_ctx_n_batch(tctx);
    for (int i = 0; i < plen; i += nb) {
        int k = plen - i < nb ? plen - i : nb;
        sd_forward_args a = {.logits = pr};
        sd_status st = sd_forward(tctx, &(sd_block){.n = k, .token = tok + i}, &a, err);
        if (st) return st;
    }
    int nr = 0;
    while (nr < R) {
        softmax_t(pr, V, tp->temp, P + (size_t)nr * V);
        int32_t y = draw(r, P + (size_t)nr * V, V);
        tok[n++] = y;
        nr++;
        if (sd_token_is_eog(target, y) || nr == R) break;
        sd_forward_args a = {.logits = pr};
        sd_status st = sd_forward(tctx, &(sd_block){.n = 1, .token = &y}, &a, err);
        if (st) return st;
    }
    /* the drafter over [X, Y]: q_t at position plen - 1 + t */
    sd_status st = src_run(s, tok, n - 1, Q, H, err);
    if (st) return st;
    memcpy(mixed, tok, (size_t)plen * sizeof *mixed);
    int first = ex->n;
    for (int t = 0; t < nr; t++) {
        float *q = pr; /* scratch [V] */
        float best = softmax_t(Q + (size_t)(plen - 1 + t) * V, V, tp->temp, q);
        int32_t d = draw(r, q, V);
        bool keep = rng_uniform(r) < tp->mix;
        mixed[plen + t] = keep ? tok[plen + t] : d;
        if (keep || ex->n == ex->cap) continue;
        float pd = P[(size_t)t * V + d], qd = q[d];
        ex->label[ex->n] = qd > 0 && pd < qd ? pd / qd : 1.0f;
        ex->top1[ex->n] = best;
        pos[ex->n - first] = plen + t; /* the state that has read d_t: from the mixed pass below */
        ex->n++;
    }
    /* the drafter over [X, Z]: the state that has read each drafted token */
    if ((st = src_run(s, mixed, n, NULL, H, err))) return st;
    for (int i = first; i < ex->n; i++)
        memcpy(ex->feat + (size_t)i * D, H + (size_t)pos[i - first] * D, (size_t)D * sizeof(float));
    return SD_OK;
}

/* ------------------------------------------------------------------ the head's loss and gradients */
typedef struct grads {
    float *W, *b, *w_out, b_out; /* shaped as the head's */
} grads;

static float sigmoidf(float z) { return 1.0f / (1.0f + expf(-z)); }

/* Weighted BCE of one example: -(y log a + w (1 - y) log(1 - a)), from the logit z (stable form). */
static double wbce(float z, float y, float w) {
    double lsp = z > 0 ? -log1p(exp(-(double)z)) : (double)z - log1p(exp((double)z)); /* log sigmoid(z) */
    double lsn = lsp - z;                                                                /* log sigmoid(-z) */
    return -(y * lsp + w * (1.0 - y) * lsn);
}

/* Binary KL(y || sigmoid(z)). */
static double bkl(float z, double y) {
    double a = sigmoidf(z), e = 1e-12;
    a = a < e ? e : a > 1 - e ? 1 - e : a;
    double k = 0;
    if (y > 0) k += y * log(y / a);
    if (y < 1) k += (1.0 - y) * log((1.0 - y) / (1.0 - a));
    return k;
}

/* Adds d(loss)/d(params) of example (y, label) scaled by scale into g; x, pre, gx, gp: scratch. Returns the loss. */
static double backward(const sd_accept_head *h, const float *y, float label, float w, float scale, grads *g, float *x,
                       float *pre, float *gx, float *gp) {
    const int D = h->dim, k = h->blocks;
    float z = accept_head_logit(h, y, x, pre);
    float a = sigmoidf(z);
    float gz = (w * (1.0f - label) * a - label * (1.0f - a)) * scale;
    const float *xk = x + (size_t)k * D;
    for (int i = 0; i < D; i++) {
        g->w_out[i] += gz * xk[i];
        gx[i] = gz * h->w_out[i];
    }
    g->b_out += gz;
    for (int j = k - 1; j >= 0; j--) {
        const float *W = accept_head_W(h, j), *xi = x + (size_t)j * D, *pj = pre + (size_t)j * D;
        float *gW = g->W + (size_t)(h->shared ? 0 : j) * D * D, *gb = g->b + (size_t)(h->shared ? 0 : j) * D;
        for (int o = 0; o < D; o++) {
            float s = pj[o], sg = sigmoidf(s);
            gp[o] = gx[o] * sg * (1.0f + s * (1.0f - sg)); /* SiLU' */
            gb[o] += gp[o];
            float *row = gW + (size_t)o * D;
            for (int i = 0; i < D; i++) row[i] += gp[o] * xi[i];
        }
        for (int o = 0; o < D; o++) { /* gx += W^T gp (the residual keeps gx) */
            const float *row = W + (size_t)o * D;
            for (int i = 0; i < D; i++) gx[i] += row[i] * gp[o];
        }
    }
    return wbce(z, label, w);
}

/* Mean weighted BCE and the binary KL over examples [from, to). The weighted BCE of label y is, up to a constant,
 * c KL(y_w || a) with c = y + w (1 - y) and y_w = y / c (the weighting moves the target toward rejection), so the KL
 * reported is sum c KL(y_w || a) / sum c: what the training lowers; with w = 1 the plain binary KL(y || a). */
static void evaluate(const sd_accept_head *h, const examples *ex, int from, int to, float w, float *scratch,
                     double *loss, double *kl) {
    double l = 0, k = 0, cs = 0;
    for (int i = from; i < to; i++) {
        float z = accept_head_logit(h, ex->feat + (size_t)i * ex->D, scratch, scratch + (size_t)(h->blocks + 1) * h->dim);
        double y = ex->label[i], c = y + w * (1.0 - y);
        l += wbce(z, ex->label[i], w);
        k += c * bkl(z, y / c);
        cs += c;
    }
    *loss = to > from ? l / (to - from) : 0;
    *kl = cs > 0 ? k / cs : 0;
}

typedef struct scored {
    float s, y;
} scored;

static int by_score(const void *a, const void *b) {
    float x = ((const scored *)a)->s, y = ((const scored *)b)->s;
    return (x > y) - (x < y);
}

/* AUC with soft labels: each example is a positive of weight y and a negative of weight 1 - y; the probability that
 * a positive scores above a negative (ties count half). */
static double soft_auc(scored *v, int n) {
    qsort(v, (size_t)n, sizeof *v, by_score);
    double neg_below = 0, pos_total = 0, neg_total = 0, num = 0;
    for (int i = 0; i < n;) {
        int j = i;
        double pos = 0, neg = 0;
        while (j < n && v[j].s == v[i].s) pos += v[j].y, neg += 1.0 - v[j].y, j++;
        num += pos * (neg_below + 0.5 * neg);
        neg_below += neg;
        pos_total += pos;
        neg_total += neg;
        i = j;
    }
    return pos_total > 0 && neg_total > 0 ? num / (pos_total * neg_total) : 0.5;
}

/* ------------------------------------------------------------------ training */
static sd_status check_params(const sd_model *target, const sd_model *draft, const sd_accept_train_params *tp,
                              sd_error *err) {
    if (!tp->corpus_path) return err_set(err, SD_ERR_ARG, "no corpus given");
    if (tp->n_tokens < 50)
        return err_set(err, SD_ERR_ARG, "tokens=%d: at least 50 drafted positions are needed to train and hold out",
                       tp->n_tokens);
    if (tp->prompt_len < 1 || tp->response_len < 2 || tp->blocks < 0 || tp->blocks > ACCEPT_HEAD_MAX_BLOCKS ||
        !(tp->w_rej > 0) || !(tp->mix >= 0 && tp->mix < 1) || !(tp->temp >= 0) || tp->epochs < 1 || tp->batch < 1 ||
        !(tp->lr > 0) || !(tp->weight_decay >= 0))
        return err_set(err, SD_ERR_ARG,
                       "invalid training parameters (prompt >= 1, response >= 2, layers 0..4, w_rej > 0, mix in "
                       "[0, 1), temp >= 0, epochs >= 1, batch >= 1, lr > 0, weight decay >= 0)");
    if ((draft != NULL) + (tp->exit_layer != 0) + (tp->skip != NULL) > 1)
        return err_set(err, SD_ERR_ARG, "give one drafter: a draft model, an exit layer or a SWIFT skip set");
    const int L = target->hp.n_layer;
    if (tp->skip) { /* SWIFT's sets: interior sub-layers only, at least one */
        int n = 0;
        for (int i = 0; i < 2 * L; i++) n += tp->skip[i] != 0;
        if (tp->skip[0] || tp->skip[1] || tp->skip[2 * L - 2] || tp->skip[2 * L - 1] || n == 0)
            return err_set(err, SD_ERR_ARG, "SWIFT skip set: skip at least one sub-layer of layers 1..%d (the first "
                           "and last layers always run)", L - 2);
    }
    if (!draft && !tp->skip && (tp->exit_layer < 1 || tp->exit_layer >= L))
        return err_set(err, SD_ERR_ARG, "early exit: the exit layer must be in [1, %d] for this %d-layer target",
                       target->hp.n_layer - 1, target->hp.n_layer);
    if (draft) {
        sd_status st = sd_vocab_compatible(target, draft, err);
        if (st) {
            err_prefix(err, "the draft model cannot draft for the target: ");
            return st;
        }
    }
    if (tp->exit_heads && !tp->exit_layer) return err_set(err, SD_ERR_ARG, "exit heads go with an exit layer");
    if (tp->exit_heads && tp->exit_heads->n_embd != target->hp.n_embd)
        return err_set(err, SD_ERR_ARG, "exit heads are for another model");
    return SD_OK;
}

sd_status sd_train_accept_head(const sd_model *target, const sd_model *draft, const sd_accept_train_params *tp,
                               sd_accept_head **out, sd_accept_train_report *rep, sd_error *err) {
    if (!target || !tp || !out) return err_set(err, SD_ERR_ARG, "sd_train_accept_head: NULL argument");
    *out = NULL;
    sd_status st = check_params(target, draft, tp, err);
    if (st) return st;
    const double t0 = train_now_s();
    const sd_model *sm = draft ? draft : target;
    const int V = target->hp.n_vocab, D = sm->hp.n_embd, plen_max = 8 * tp->prompt_len + 1; /* + BOS */
    int n_ctx = plen_max + tp->response_len + 1;
    int cap_ctx = target->hp.n_ctx_train < sm->hp.n_ctx_train ? target->hp.n_ctx_train : sm->hp.n_ctx_train;
    if (n_ctx > cap_ctx) n_ctx = cap_ctx;
    sd_accept_train_params p = *tp;
    if (p.response_len > n_ctx - plen_max - 1) p.response_len = n_ctx - plen_max - 1;
    if (p.response_len < 2) return err_set(err, SD_ERR_ARG, "the models' context (%d) leaves no room for a response", cap_ctx);
    sd_accept_train_report local;
    if (!rep) rep = &local;
    memset(rep, 0, sizeof *rep);

    sd_ctx_params cp = sd_ctx_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = 64;
    cp.n_threads = p.n_threads;
    sd_ctx *tctx = NULL, *dctx = NULL;
    int *lens = NULL, n_seq = 0;
    int32_t **seqs = NULL, *tok = NULL, *mixed = NULL;
    int *pos = NULL, *cuts = NULL;
    float *P = NULL, *Q = NULL, *H = NULL, *pr = NULL, *scratch = NULL, *gbuf = NULL, *best = NULL;
    scored *sc = NULL;
    int *order = NULL;
    examples ex = {.cap = p.n_tokens, .D = D};
    sd_accept_head *h = NULL;
    src s = {.E = draft || p.skip ? sm->hp.n_layer : p.exit_layer, .heads = draft ? NULL : p.exit_heads, .skip = p.skip,
             .D = D, .V = V, .nb = 64};
    if ((st = sd_ctx_new(target, &cp, &tctx, err)) || (st = sd_ctx_new(sm, &cp, &dctx, err))) goto done;
    s.ctx = dctx;
    /* enough stories for n_tokens drafted positions (about (1 - mix) of each response), and some to spare */
    int per_story = (int)(p.response_len * (1.0 - p.mix) * 0.5) + 1;
    int want_stories = 2 * (p.n_tokens / per_story) + 16; /* room for skipped duplicates */
    seqs = train_read_stories(target, p.corpus_path, plen_max, want_stories * plen_max, &lens, &n_seq, err);
    if (!seqs) {
        st = err ? err->status : SD_ERR_FORMAT;
        goto done;
    }
    tok = malloc((size_t)n_ctx * sizeof *tok);
    pos = malloc((size_t)p.response_len * sizeof *pos);
    cuts = malloc((size_t)n_seq * sizeof *cuts);
    mixed = malloc((size_t)n_ctx * sizeof *mixed);
    P = malloc((size_t)p.response_len * V * sizeof *P);
    Q = malloc((size_t)n_ctx * V * sizeof *Q);
    H = malloc((size_t)n_ctx * D * sizeof *H);
    pr = malloc((size_t)V * sizeof *pr);
    s.want = malloc(64);
    ex.feat = malloc((size_t)ex.cap * D * sizeof *ex.feat);
    ex.label = malloc((size_t)ex.cap * sizeof *ex.label);
    ex.top1 = malloc((size_t)ex.cap * sizeof *ex.top1);
    h = accept_head_new(sm, s.E, p.blocks, p.shared);
    if (h && p.skip && !accept_head_set_skip(h, p.skip)) {
        sd_accept_head_free(h);
        h = NULL;
    }
    if (!tok || !pos || !cuts || !mixed || !P || !Q || !H || !pr || !s.want || !ex.feat || !ex.label || !ex.top1 || !h) {
        st = err_set(err, SD_ERR_NOMEM, "out of memory collecting %d training positions", ex.cap);
        goto done;
    }
    memset(s.want, 1, 64);
    say(&p, "collecting %d drafted positions: %s answers corpus prompts of %d tokens with %d tokens, the drafter (%s) "
        "reads token-mixed responses (r = %g)", ex.cap, "the target", p.prompt_len, p.response_len,
        draft ? "draft model" : p.skip ? "SWIFT's skip set" : "early exit", p.mix);
    rng r;
    rng_seed(&r, p.seed * 0x9e3779b97f4a7c15ull + 17);
    int used = 0;
    double t_last = t0;
    for (int si = 0; si < n_seq && ex.n < ex.cap; si++) {
        int lo = p.prompt_len + 1 < lens[si] ? p.prompt_len + 1 : lens[si]; /* BOS + prompt_len .. the whole cut */
        int cut = lo + (int)(rng_next(&r) % (uint64_t)(lens[si] - lo + 1));
        bool seen = false; /* an earlier story with the same prompt */
        for (int sj = 0; sj < si && !seen; sj++)
            seen = cuts[sj] == cut && !memcmp(seqs[sj], seqs[si], (size_t)cut * sizeof **seqs);
        cuts[si] = cut;
        if (seen) continue;
        if ((st = story_examples(tctx, &s, target, &p, seqs[si], cut, &r, tok, mixed, P, Q, H, pr, pos, &ex, err)))
            goto done;
        used++;
        if (train_now_s() - t_last > 5.0 || ex.n == ex.cap) {
            t_last = train_now_s();
            say(&p, "  %d/%d positions from %d prompts (%.0f s)", ex.n, ex.cap, used, t_last - t0);
        }
    }
    if (ex.n < 50) {
        st = err_set(err, SD_ERR_FORMAT, "%s: too little text: %d drafted positions from %d prompts (50 needed)",
                     p.corpus_path, ex.n, n_seq);
        goto done;
    }
    const int n_held = ex.n / 10 > 5 ? ex.n / 10 : 5, n_val = n_held, n_train = ex.n - n_held - n_val;
    const int v0 = n_train, h0 = n_train + n_val;
    rep->n_train = n_train, rep->n_val = n_val, rep->n_heldout = n_held;
    double ml = 0, mh = 0;
    for (int i = 0; i < n_train; i++) ml += ex.label[i];
    for (int i = h0; i < ex.n; i++) mh += ex.label[i];
    ml /= n_train;
    rep->mean_label = mh / n_held;

    /* initial head: small random block weights, output = the constant predictor of the mean training label */
    const size_t nW = (size_t)h->n_sets * D * D, nb = (size_t)h->n_sets * D, n_par = nW + nb + (size_t)D + 1;
    for (size_t i = 0; i < nW; i++) h->W[i] = (float)((rng_uniform(&r) * 2 - 1) * 0.1 / sqrt((double)D));
    float mlc = (float)(ml < 1e-4 ? 1e-4 : ml > 1 - 1e-4 ? 1 - 1e-4 : ml);
    h->b_out = logf(mlc / (1 - mlc));
    scratch = malloc((size_t)(2 * ACCEPT_HEAD_MAX_BLOCKS + 3) * D * sizeof *scratch);
    gbuf = calloc(n_par * 3, sizeof *gbuf); /* gradients, first and second moments, each in the order W, b, w_out, b_out */
    best = malloc(n_par * sizeof *best);
    order = malloc((size_t)n_train * sizeof *order);
    sc = malloc((size_t)n_held * sizeof *sc);
    if (!scratch || !gbuf || !best || !order || !sc) {
        st = err_set(err, SD_ERR_NOMEM, "out of memory training the head");
        goto done;
    }
    float *x = scratch, *pre = x + (size_t)(ACCEPT_HEAD_MAX_BLOCKS + 1) * D, *gx = pre + (size_t)ACCEPT_HEAD_MAX_BLOCKS * D,
          *gp = gx + D;
    double vloss, kl;
    evaluate(h, &ex, h0, ex.n, p.w_rej, scratch, &vloss, &rep->kl_before);
    evaluate(h, &ex, v0, h0, p.w_rej, scratch, &vloss, &kl);
    double best_val = vloss;
    float *g = gbuf, *m = gbuf + n_par, *v = gbuf + 2 * n_par;
    memcpy(best, h->W, nW * sizeof *best);
    memcpy(best + nW, h->b, nb * sizeof *best);
    memcpy(best + nW + nb, h->w_out, (size_t)D * sizeof *best);
    best[n_par - 1] = h->b_out;
    say(&p, "training on %d positions (validation %d, held out %d; mean soft acceptance %.3f): %d block%s%s, w_rej %g, "
        "%d epochs, batch %d, lr %g", n_train, n_val, n_held, ml, p.blocks, p.blocks == 1 ? "" : "s",
        p.shared ? " (shared weights)" : "", p.w_rej, p.epochs, p.batch, p.lr);
    say(&p, "before: validation loss %.4f, held-out binary KL %.4f (the constant predictor)", vloss, rep->kl_before);
    for (int i = 0; i < n_train; i++) order[i] = i;
    int step = 0;
    for (int ep = 1; ep <= p.epochs; ep++) {
        for (int i = n_train - 1; i > 0; i--) {
            int j = (int)(rng_next(&r) % (uint64_t)(i + 1));
            int t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        double loss = 0;
        for (int b0 = 0; b0 < n_train; b0 += p.batch) {
            int bn = n_train - b0 < p.batch ? n_train - b0 : p.batch;
            memset(g, 0, n_par * sizeof *g);
            grads gr = {g, g + nW, g + nW + nb, 0};
            for (int k = 0; k < bn; k++) {
                int e = order[b0 + k];
                loss += backward(h, ex.feat + (size_t)e * D, ex.label[e], p.w_rej, 1.0f / (float)bn, &gr, x, pre, gx, gp);
            }
            g[n_par - 1] = gr.b_out;
            step++;
            train_adamw(h->W, g, m, v, nW, p.lr, p.weight_decay, step);
            train_adamw(h->b, g + nW, m + nW, v + nW, nb, p.lr, 0, step);
            train_adamw(h->w_out, g + nW + nb, m + nW + nb, v + nW + nb, (size_t)D, p.lr, p.weight_decay, step);
            train_adamw(&h->b_out, g + n_par - 1, m + n_par - 1, v + n_par - 1, 1, p.lr, 0, step);
        }
        loss /= n_train;
        if (ep == 1) rep->loss_first = loss;
        rep->loss_last = loss;
        evaluate(h, &ex, v0, h0, p.w_rej, scratch, &vloss, &kl);
        double hl, hkl;
        evaluate(h, &ex, h0, ex.n, p.w_rej, scratch, &hl, &hkl);
        if (vloss < best_val) {
            best_val = vloss;
            rep->kept_epoch = ep;
            memcpy(best, h->W, nW * sizeof *best);
            memcpy(best + nW, h->b, nb * sizeof *best);
            memcpy(best + nW + nb, h->w_out, (size_t)D * sizeof *best);
            best[n_par - 1] = h->b_out;
        }
        say(&p, "epoch %d/%d: training loss %.4f, validation loss %.4f, held-out binary KL %.4f", ep, p.epochs, loss,
            vloss, hkl);
    }
    memcpy(h->W, best, nW * sizeof *best);
    memcpy(h->b, best + nW, nb * sizeof *best);
    memcpy(h->w_out, best + nW + nb, (size_t)D * sizeof *best);
    h->b_out = best[n_par - 1];
    evaluate(h, &ex, h0, ex.n, p.w_rej, scratch, &vloss, &rep->kl_after);
    for (int i = 0; i < n_held; i++) {
        sc[i].s = accept_head_logit(h, ex.feat + (size_t)(h0 + i) * D, x, pre);
        sc[i].y = ex.label[h0 + i];
    }
    rep->auc_head = soft_auc(sc, n_held);
    for (int i = 0; i < n_held; i++) sc[i] = (scored){ex.top1[h0 + i], ex.label[h0 + i]};
    rep->auc_top1 = soft_auc(sc, n_held);
    rep->seconds = train_now_s() - t0;
done:
    train_free_stories(seqs, lens, n_seq);
    free(tok);
    free(pos);
    free(cuts);
    free(mixed);
    free(P);
    free(Q);
    free(H);
    free(pr);
    free(s.want);
    free(ex.feat);
    free(ex.label);
    free(ex.top1);
    free(scratch);
    free(gbuf);
    free(best);
    free(order);
    free(sc);
    sd_ctx_free(tctx);
    sd_ctx_free(dctx);
    if (st) sd_accept_head_free(h);
    else *out = h;
    return st;
}
