/* draft_model: a separate (smaller or cheaper) model with its own context and KV cache, kept in step with the
 * target's history: after each round its cache is cut back to the longest prefix of the new history it has
 * seen, and the next draft first feeds what it has not (at least the pending token).
 * Chains: one token at a time, asking the controller. Token trees (tree_nodes > 0; SWIFT-style, methods.md 4):
 * level by level, each node of the newest level gets the top-c tokens of its draft distribution as children, c by
 * the node's top-1 probability (the tree_conf buckets), until the node budget or the depth bound; the tree so far
 * runs as one tree block in the draft cache to give the new level's distributions (the same bits as one node at a
 * time), and the draft cache is cut back to the history after the round. Tree children are one-hot (chosen by
 * rank), so acceptance is the multi-candidate rule for deterministic candidates. */
#include <stdlib.h>
#include <string.h>

#include "speculative/accept.h"
#include "speculative/spec.h"
#include "util/err.h"

typedef struct model_drafter {
    drafter base;
    sd_ctx *ctx;
    int seq;
    sd_sampler *smp; /* the target's processing, its own RNG */
    bool greedy;
    int V, n_batch;
    int len;         /* tokens of hist in the draft cache */
    float *logits;   /* [V] */
    /* the round in progress (drafting one forward at a time) */
    int32_t *hist;
    int n, max, k;
    ctrl *c;
    draft_tree *t;
    enum { MD_FEED, MD_CHAIN, MD_TREE } phase;
    uint8_t one;     /* 1: a want flag */
    int dep, fb, fe, budget; /* trees: the depth being added, the newest level's nodes [fb, fe), the node budget */
    /* trees */
    int tree_nodes, n_conf, topk[8];
    float conf[7];
    float *tl;       /* [n_batch][V] draft logits of the tree's newest level */
    float *probs;    /* [V] */
    int32_t *tpos;   /* [n_batch] tree block positions */
    uint8_t *twant;  /* [n_batch] */
    int *depth;      /* [n_batch] depth of each node (1 = child of the root) */
    /* controllers reading the hidden state (SpecDec++) */
    int L, D;
    float *hl;       /* [L][1][D] states of the last chain forward (hidden_layers); the last layer's is the feature */
    bool have_hl;    /* hl holds the state of the position that gave md->logits */
    /* an observer of the predictions (auto): every fed position's logits */
    draft_pred_cb pred_cb;
    void *pred_user;
    float *flogits;  /* [n_batch][V] logits of every position of a feed chunk (when observed) */
} model_drafter;

/* The next chunk of hist[md->len .. to) for the draft cache (at most n_batch), with the logits of position to - 1
 * into md->logits when want_logits and the chunk reaches it; md->len advances when the forward has run. */
static void feed_chunk(model_drafter *md, const int32_t *hist, int to, bool want_logits, fwd_req *r) {
    const int c = to - md->len < md->n_batch ? to - md->len : md->n_batch;
    *r = (fwd_req){.seq = md->seq, .n = c, .token = hist + md->len};
    if (md->pred_cb) { /* observed: every entry's logits (the last one's copied to md->logits in fed) */
        memset(md->twant, 1, (size_t)c);
        r->want = md->twant;
        r->logits = md->flogits;
    } else if (want_logits && md->len + c == to) { /* the last entry's logits only */
        memset(md->twant, 0, (size_t)c - 1);
        md->twant[c - 1] = 1;
        r->want = md->twant;
        r->logits = md->logits;
    }
}

/* A feed chunk r ran: the observer gets its predictions, md->logits the last entry's (observed feeds), len moves. */
static void fed(model_drafter *md, const fwd_req *r) {
    if (md->pred_cb && r->logits == md->flogits) {
        for (int j = 0; j < r->n; j++) md->pred_cb(md->pred_user, md->len + j, md->flogits + (size_t)j * md->V, md->V);
        memcpy(md->logits, md->flogits + (size_t)(r->n - 1) * md->V, (size_t)md->V * sizeof(float));
    }
    md->len += r->n;
}

/* Feeds hist[len .. to) into the draft cache, one chunk after the other. */
static sd_status feed_to(model_drafter *md, const int32_t *hist, int to, sd_error *err) {
    while (md->len < to) {
        fwd_req r;
        feed_chunk(md, hist, to, false, &r);
        if (fwd_req_run(md->ctx, &r)) {
            if (err) *err = r.err;
            err_prefix(err, "draft model: ");
            sd_kv_truncate(md->ctx, md->seq, md->len, NULL);
            return r.status;
        }
        fed(md, &r);
    }
    return SD_OK;
}

static sd_status md_begin(drafter *d, const int32_t *hist, int n, sd_error *err) {
    model_drafter *md = (model_drafter *)d;
    sd_kv_truncate(md->ctx, md->seq, 0, NULL);
    md->len = 0;
    return feed_to(md, hist, n - 1, err); /* the prompt but its newest token, which the first round feeds */
}

sd_status drafter_model_sync(drafter *d, const int32_t *hist, int n, sd_error *err) {
    return feed_to((model_drafter *)d, hist, n - 1, err);
}

int drafter_model_len(const drafter *d) { return ((const model_drafter *)d)->len; }

void drafter_model_observe(drafter *d, draft_pred_cb cb, void *user) {
    model_drafter *md = (model_drafter *)d;
    if (cb && !md->flogits && !(md->flogits = malloc((size_t)md->n_batch * md->V * sizeof(float)))) return;
    md->pred_cb = cb;
    md->pred_user = user;
}

/* Writes the path root -> node (exclusive of the root) into hist[n ..]; returns its length. */
static int path_into(const draft_tree *t, int node, int32_t *hist, int n, const int *depth) {
    int d = node < 0 ? 0 : depth[node];
    for (int j = node, i = d - 1; j >= 0; j = t->parent[j], i--) hist[n + i] = t->token[j];
    return d;
}

/* Children per node by its top-1 probability (SWIFT's buckets). */
static int children_for(const model_drafter *md, float top1) {
    int i = 0;
    while (i < md->n_conf && top1 >= md->conf[i]) i++;
    return md->topk[i];
}

/* Adds the next tree level below nodes [fb, fe) (the root when fb = -1); false when nothing was added. */
static bool tree_add_level(model_drafter *md) {
    draft_tree *t = md->t;
    const int V = md->V, k0 = md->k, dep = md->dep;
    /* nodes kept back for the deeper levels, so that the tree always holds the chain of top-1 tokens as deep as a
     * chain drafter would go (node 0 of each level is the top-1 child of the previous level's node 0) */
    const int level_cap = md->budget - (md->max - dep);
    int k = k0;
    for (int par = md->fb; par < md->fe && k < md->budget; par++) {
        const float *row = par < 0 ? md->logits : md->tl + (size_t)(par - md->fb) * V;
        const float *score = row;
        int32_t best = accept_argmax(row, V);
        float top1;
        if (md->greedy) {
            top1 = accept_top1_prob(row, V, best, 1.0f);
        } else { /* rank by the processed distribution (penalty history: the path) */
            int len = path_into(t, par, md->hist, md->n, md->depth);
            sd_sampler_probs(md->smp, row, md->hist, md->n + len, md->probs);
            score = md->probs;
            best = accept_argmax(score, V);
            top1 = score[best];
        }
        int c = children_for(md, top1);
        /* the c best tokens, best first (lowest id on ties) */
        for (int j = 0; j < c && k < md->budget && (k < level_cap || k == k0); j++) {
            int32_t x = -1;
            for (int v = 0; v < V; v++) {
                if (x >= 0 && !(score[v] > score[x])) continue;
                bool taken = false;
                for (int i = k - j; i < k && !taken; i++) taken = t->token[i] == v;
                if (!taken) x = v;
            }
            if (x < 0 || (!md->greedy && score[x] <= 0.0f)) break;
            t->token[k] = x;
            t->parent[k] = par;
            md->depth[k] = dep;
            k++;
        }
    }
    md->k = k;
    md->fb = k0;
    md->fe = k;
    return k > k0;
}

/* The next forward of the round, or 0 when the round is drafted. */
static int md_step(model_drafter *md, fwd_req *r, int *k) {
    draft_tree *t = md->t;
    const int n = md->n;
    if (md->len < n) { /* catch up with the history, in chunks; the last one's logits are the root's */
        md->phase = MD_FEED;
        feed_chunk(md, md->hist, n, true, r);
        return 1;
    }
    if (md->tree_nodes > 0) {
        if (md->phase != MD_TREE) { /* the root's logits are in: the first level */
            md->budget = t->max_nodes < md->tree_nodes ? t->max_nodes : md->tree_nodes;
            if (md->budget > md->n_batch) md->budget = md->n_batch;
            md->fb = -1, md->fe = 0, md->dep = 0;
            md->phase = MD_TREE;
        }
        md->dep++;
        if (md->dep > md->max || md->k >= md->budget || !tree_add_level(md) || md->dep == md->max ||
            md->k >= md->budget) {
            sd_kv_truncate(md->ctx, md->seq, n, NULL);
            *k = md->k;
            return 0;
        }
        /* the tree so far, as one block after the history (re-run from the history on: the same bits as node by
         * node): logits of the newest level */
        sd_kv_truncate(md->ctx, md->seq, n, NULL);
        for (int j = 0; j < md->k; j++) {
            md->tpos[j] = n - 1 + md->depth[j];
            md->twant[j] = j >= md->fb;
        }
        *r = (fwd_req){.seq = md->seq, .n = md->k, .token = t->token, .parent = t->parent, .pos = md->tpos,
                       .want = md->twant, .logits = md->tl};
        return 1;
    }
    /* a chain: one token at a time, asking the controller */
    md->phase = MD_CHAIN;
    if (md->k < md->max) {
        const int i = md->k;
        const float *state = md->have_hl ? md->hl + (size_t)(md->L - 1) * md->D : NULL;
        if (draft_chain_step(t, md->c, md->smp, md->greedy, md->logits, md->V, state, md->D, md->hist, n, i) >= 0) {
            md->k++;
            if (md->k < md->max) {
                *r = (fwd_req){.seq = md->seq, .n = 1, .token = t->token + i, .want = &md->one, .logits = md->logits,
                               .hidden_layers = md->c->uses_hidden ? md->hl : NULL};
                md->have_hl = md->c->uses_hidden;
                return 1;
            }
        }
    }
    *k = md->k;
    return 0;
}

static int md_start(drafter *d, int32_t *hist, int n, int max, ctrl *c, draft_tree *t, fwd_req *r, int *k,
                    sd_error *err) {
    model_drafter *md = (model_drafter *)d;
    (void)err;
    md->hist = hist, md->n = n, md->max = max, md->c = c, md->t = t, md->k = 0;
    md->have_hl = false; /* the root's logits come from the feed, whose states are not kept */
    md->phase = MD_FEED;
    t->onehot = md->tree_nodes > 0;
    return md_step(md, r, k);
}

static int md_next(drafter *d, fwd_req *r, int *k, sd_error *err) {
    model_drafter *md = (model_drafter *)d;
    if (r->status) {
        if (err) *err = r->err;
        err_prefix(err, "draft model: ");
        sd_kv_truncate(md->ctx, md->seq, md->len < md->n ? md->len : md->n, NULL);
        return -1;
    }
    if (md->phase == MD_FEED) fed(md, r);
    else if (md->phase == MD_CHAIN) {
        md->len = md->n + md->k;
        if (md->pred_cb) md->pred_cb(md->pred_user, md->len - 1, md->logits, md->V);
    }
    return md_step(md, r, k);
}

/* The round alone: each forward runs as it comes. */
static int md_draft(drafter *d, int32_t *hist, int n, int max, ctrl *c, draft_tree *t, sd_error *err) {
    model_drafter *md = (model_drafter *)d;
    fwd_req r;
    int k = 0, st = md_start(d, hist, n, max, c, t, &r, &k, err);
    while (st == 1) {
        fwd_req_run(md->ctx, &r);
        st = md_next(d, &r, &k, err);
    }
    return st < 0 ? -1 : k;
}

static void md_on_verified(drafter *d, const int32_t *hist, int n, int n_acc) {
    model_drafter *md = (model_drafter *)d;
    (void)hist, (void)n_acc;
    /* the cache holds the old pending token and the drafts it ran; the accepted ones are hist's, so keep the
     * common prefix: everything up to the new pending token (hist[n-1]) at most */
    if (md->len > n - 1) md->len = n - 1;
    sd_kv_truncate(md->ctx, md->seq, md->len, NULL);
}

static void md_free(drafter *d) {
    model_drafter *md = (model_drafter *)d;
    sd_sampler_free(md->smp);
    free(md->logits);
    free(md->tl);
    free(md->probs);
    free(md->tpos);
    free(md->twant);
    free(md->depth);
    free(md->hl);
    free(md->flogits);
    free(md);
}

drafter *drafter_model_new(sd_ctx *dctx, int seq, const sd_sampler *smp, const sd_spec_params *spp, sd_error *err) {
    model_drafter *md = calloc(1, sizeof *md);
    sd_model_info info;
    sd_model_get_info(sd_ctx_model(dctx), &info);
    if (!md || draft_sampler_new(smp, info.n_vocab, 0x5bd1e995u, &md->smp, NULL, err) != SD_OK ||
        !(md->logits = malloc((size_t)info.n_vocab * sizeof(float)))) {
        if (md) md_free(&md->base);
        err_set(err, SD_ERR_NOMEM, "out of memory creating the draft model's drafter");
        return NULL;
    }
    md->base = (drafter){"draft", 0, md_begin, md_draft, NULL, NULL, md_on_verified, md_free, dctx, md_start, md_next, NULL, NULL};
    md->ctx = dctx;
    md->seq = seq;
    md->greedy = sd_sampler_is_greedy(smp);
    md->V = info.n_vocab;
    md->n_batch = sd_ctx_n_batch(dctx);
    md->one = 1;
    md->L = info.n_layer;
    md->D = info.n_embd;
    if (!(md->twant = malloc((size_t)md->n_batch)) || !(md->hl = malloc((size_t)md->L * md->D * sizeof(float)))) {
        md_free(&md->base);
        err_set(err, SD_ERR_NOMEM, "out of memory creating the draft model's drafter");
        return NULL;
    }
    if (spp->tree_nodes > 0) {
        const size_t B = (size_t)md->n_batch, V = (size_t)info.n_vocab;
        md->tree_nodes = spp->tree_nodes;
        md->n_conf = spp->n_tree_conf;
        memcpy(md->topk, spp->tree_topk, sizeof md->topk);
        memcpy(md->conf, spp->tree_conf, sizeof md->conf);
        md->tl = malloc(B * V * sizeof(float));
        md->probs = malloc(V * sizeof(float));
        md->tpos = malloc(B * sizeof *md->tpos);
        md->depth = malloc(B * sizeof *md->depth);
        if (!md->tl || !md->probs || !md->tpos || !md->depth) {
            md_free(&md->base);
            err_set(err, SD_ERR_NOMEM, "out of memory creating the draft model's tree drafter");
            return NULL;
        }
    }
    return &md->base;
}
