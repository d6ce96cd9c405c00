/* specdec train accept-head: fit SpecDec++'s acceptance head for a target and a drafter (a draft model, the target's
 * own first E layers, or the target with a SWIFT skip set). */
#include <stdio.h>
#include <stdlib.h>

#include "cmd_opts.h"
#include "cmds.h"
#include "specdec.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: specdec train accept-head -m TARGET (--draft-model DRAFT | --exit-layer E | --skip-set FILE | --swift)\n"
            "                                 --corpus FILE --out HEAD.gguf [options]\n\n"
            "SpecDec++ (methods.md 5): the target answers prompts taken from the corpus (the beginning of each story,\n"
            "stories separated by lines <|endofstory|>: a seeded cut of N..8N tokens, equal prompts used once); the\n"
            "drafter reads token-mixed responses (each\n"
            "response position replaced by a draft sample with probability 1 - r); a small residual MLP on the\n"
            "drafter's hidden state learns each drafted token's soft acceptance min(1, p(x)/q(x)) with a binary\n"
            "cross-entropy weighted W on the rejection class (AdamW; the epoch with the best validation loss is\n"
            "kept). Prints progress, the held-out binary KL per epoch and, at the end, the held-out AUC of the head\n"
            "and of the draft's own top-1 probability as predictors of acceptance. Use the head with\n"
            "--ctrl specdecpp --accept-head HEAD.gguf [--stop-threshold H].\n\n"
            "  --draft-model FILE  the draft model (same tokenizer as the target)\n"
            "  --exit-layer E      or: early exit, the target's first E layers draft   --exit-heads FILE  their heads\n"
            "  --skip-set FILE     or: SWIFT, the target with the best skip set of this optimiser state (the file\n"
            "                      --skip-set writes in generate / serve); the head serves --spec swift --ctrl specdecpp\n"
            "                      at the same skip ratio (its set size)\n"
            "  --swift             or: SWIFT with its starting set (every other layer) for --skip-ratio R (0.45)\n"
            "  --tokens N          drafted positions to collect: train + validation + held out (default 24000)\n"
            "  --layers K          residual blocks x + SiLU(Wx + b), 0..4 (default 3)   --shared  one block's weights K times\n"
            "  --w-rej W           weight of the rejection class (default 6)\n"
            "  --mix R             probability a response position keeps the target's token (default 0.15)\n"
            "  --prompt N          shortest prompt, tokens (default 8)   --response N  generated tokens (default 96)\n"
            "  --temp T            temperature of the responses and of p, q for the labels (default 1; 0: greedy, the\n"
            "                      label is whether the draft's argmax is the target's)\n"
            "  --epochs E          (default 6)   --batch N  (default 64)   --lr LR  (default 3e-3)   --wd X  (0.01)\n"
            "  -t N                threads; --seed S (default 1; the result is the same for a seed)\n");
}

int cmd_train_accept(int argc, char **argv) {
    sd_accept_train_params tp = sd_accept_train_default_params();
    const char *model_path = NULL, *draft_path = NULL, *heads_path = NULL, *out = NULL, *skip_path = NULL;
    bool swift = false;
    float skip_ratio = -1;
    const cmd_opt opts[] = {
        CMD_FLAG("--shared", &tp.shared),
        CMD_FLAG("--swift", &swift),
        CMD_STR("--skip-set", NULL, &skip_path),
        CMD_FLOAT("--skip-ratio", &skip_ratio, 1e-6, 1),
        CMD_STR("-m", "--model", &model_path),
        CMD_STR("--draft-model", NULL, &draft_path),
        CMD_STR("--exit-heads", NULL, &heads_path),
        CMD_STR("--corpus", NULL, &tp.corpus_path),
        CMD_STR("--out", "-o", &out),
        CMD_INT("--exit-layer", &tp.exit_layer, 1, 4096),
        CMD_INT("--tokens", &tp.n_tokens, 50, 1 << 24),
        CMD_INT("--layers", &tp.blocks, 0, 4),
        CMD_FLOAT("--w-rej", &tp.w_rej, 1e-6, 1e6),
        CMD_FLOAT("--mix", &tp.mix, 0, 0.999),
        CMD_INT("--prompt", &tp.prompt_len, 1, 1 << 16),
        CMD_INT("--response", &tp.response_len, 2, 1 << 16),
        CMD_FLOAT("--temp", &tp.temp, 0, 100),
        CMD_INT("--epochs", &tp.epochs, 1, 1000),
        CMD_INT("--batch", &tp.batch, 1, 1 << 16),
        CMD_FLOAT("--lr", &tp.lr, 1e-9, 10),
        CMD_FLOAT("--wd", &tp.weight_decay, 0, 10),
        CMD_INT("-t", &tp.n_threads, 1, 512),
        CMD_U64("--seed", &tp.seed),
        CMD_OPTS_END,
    };
    int rc_opts = cmd_opts_parse(argc, argv, 2, opts, "train accept-head", usage);
    if (rc_opts >= 0) return rc_opts;
    if (!model_path || !tp.corpus_path || !out) {
        fprintf(stderr, "error: -m TARGET, --corpus FILE and --out FILE are required\n");
        return 2;
    }
    if ((draft_path != NULL) + (tp.exit_layer != 0) + (skip_path != NULL) + swift != 1) {
        fprintf(stderr, "error: give the drafter: --draft-model FILE, --exit-layer E, --skip-set FILE or --swift (one of "
                        "them)\n");
        return 2;
    }
    if (skip_ratio >= 0 && !swift) {
        fprintf(stderr, "error: --skip-ratio goes with --swift (a --skip-set file holds its own set)\n");
        return 2;
    }
    if (heads_path && !tp.exit_layer) {
        fprintf(stderr, "error: --exit-heads goes with --exit-layer\n");
        return 2;
    }
    tp.progress = cmd_progress_line;
    sd_error err;
    sd_model *m = NULL, *dm = NULL;
    sd_exit_heads *heads = NULL;
    sd_accept_head *h = NULL;
    sd_accept_train_report rep;
    sd_swift_state *st = NULL;
    uint8_t *mask = NULL;
    char set[1024] = "";
    int rc = 1;
    if (sd_model_load(model_path, NULL, &m, &err) != SD_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        goto done;
    }
    if (draft_path && sd_model_load(draft_path, NULL, &dm, &err) != SD_OK) {
        fprintf(stderr, "error: draft model: %s\n", err.msg);
        goto done;
    }
    if (skip_path || swift) { /* SWIFT: the state's best set, or the starting set of the ratio */
        sd_model_info mi;
        sd_model_get_info(m, &mi);
        sd_spec_params sp = sd_spec_default_params();
        if (skip_ratio >= 0) sp.swift_skip_ratio = skip_ratio;
        sd_status s2 = skip_path ? sd_swift_state_load(skip_path, mi.n_layer, &st, &err)
                                 : sd_swift_state_new(mi.n_layer, &sp, 1, &st, &err);
        if (s2 != SD_OK || !(mask = malloc(2 * (size_t)mi.n_layer))) {
            fprintf(stderr, "error: %s%s\n", skip_path ? "--skip-set: " : "", s2 ? err.msg : "out of memory");
            goto done;
        }
        if (sd_swift_state_best(st, mask, NULL, NULL) == 0) {
            fprintf(stderr, "error: the SWIFT skip set skips nothing (skip ratio too small for %d layers)\n", mi.n_layer);
            goto done;
        }
        sd_swift_state_describe(st, set, sizeof set);
        fprintf(stderr, "SWIFT skip set: %s\n", set);
        tp.skip = mask;
    }
    if (heads_path) {
        if (sd_exit_heads_load(m, heads_path, &heads, &err) != SD_OK) {
            fprintf(stderr, "error: --exit-heads: %s\n", err.msg);
            goto done;
        }
        tp.exit_heads = heads;
    }
    if (sd_train_accept_head(m, dm, &tp, &h, &rep, &err) != SD_OK || sd_accept_head_save(h, out, &err) != SD_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        goto done;
    }
    char who[1100];
    if (mask) snprintf(who, sizeof who, "SWIFT (skip set %s)", set);
    else snprintf(who, sizeof who, "%s", draft_path ? draft_path : "early exit");
    printf("acceptance head for %s drafting for %s: %d training / %d validation / %d held-out positions, %.1f s\n",
           who, model_path, rep.n_train, rep.n_val, rep.n_heldout, rep.seconds);
    printf("mean soft acceptance (held out) %.3f; weighted BCE first epoch %.4f, last %.4f; kept epoch %d\n",
           rep.mean_label, rep.loss_first, rep.loss_last, rep.kept_epoch);
    printf("held-out binary KL: %.4f before (constant predictor) -> %.4f after\n", rep.kl_before, rep.kl_after);
    printf("held-out AUC of acceptance: head %.3f, draft top-1 probability %.3f\n", rep.auc_head, rep.auc_top1);
    printf("wrote %s\n", out);
    rc = 0;
done:
    sd_swift_state_free(st);
    free(mask);
    sd_accept_head_free(h);
    sd_exit_heads_free(heads);
    sd_model_free(dm);
    sd_model_free(m);
    return rc;
}
