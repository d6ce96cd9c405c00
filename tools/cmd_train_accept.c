/* specdec train accept-head: fit SpecDec++'s acceptance head for a target and a drafter (a draft model, or the
 * target's own first E layers). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
#include "cmds.h"
#include "specdec.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: specdec train accept-head -m TARGET (--draft-model DRAFT | --exit-layer E) --corpus FILE\n"
            "                                 --out HEAD.gguf [options]\n\n"
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

static void progress(void *user, const char *line) {
    (void)user;
    fprintf(stderr, "%s\n", line);
}

int cmd_train_accept(int argc, char **argv) {
    sd_accept_train_params tp = sd_accept_train_default_params();
    const char *model_path = NULL, *draft_path = NULL, *heads_path = NULL, *out = NULL;
    static const char *const no_value[] = {"--shared", NULL};
    for (int i = 2; i < argc; i++) {
        const char *a, *v;
        int tk = cli_take(argc, argv, &i, &a, &v, "train accept-head", no_value, usage);
        if (tk >= 0) return tk;
        if (!strcmp(a, "--shared")) tp.shared = true;
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_path = v;
        else if (!strcmp(a, "--draft-model")) draft_path = v;
        else if (!strcmp(a, "--exit-heads")) heads_path = v;
        else if (!strcmp(a, "--corpus")) tp.corpus_path = v;
        else if (!strcmp(a, "--out") || !strcmp(a, "-o")) out = v;
        else if (!strcmp(a, "--exit-layer")) { if (!cli_int(a, v, 1, 4096, &tp.exit_layer)) return 2; }
        else if (!strcmp(a, "--tokens")) { if (!cli_int(a, v, 50, 1 << 24, &tp.n_tokens)) return 2; }
        else if (!strcmp(a, "--layers")) { if (!cli_int(a, v, 0, 4, &tp.blocks)) return 2; }
        else if (!strcmp(a, "--w-rej")) { if (!cli_float(a, v, 1e-6, 1e6, &tp.w_rej)) return 2; }
        else if (!strcmp(a, "--mix")) { if (!cli_float(a, v, 0, 0.999, &tp.mix)) return 2; }
        else if (!strcmp(a, "--prompt")) { if (!cli_int(a, v, 1, 1 << 16, &tp.prompt_len)) return 2; }
        else if (!strcmp(a, "--response")) { if (!cli_int(a, v, 2, 1 << 16, &tp.response_len)) return 2; }
        else if (!strcmp(a, "--temp")) { if (!cli_float(a, v, 0, 100, &tp.temp)) return 2; }
        else if (!strcmp(a, "--epochs")) { if (!cli_int(a, v, 1, 1000, &tp.epochs)) return 2; }
        else if (!strcmp(a, "--batch")) { if (!cli_int(a, v, 1, 1 << 16, &tp.batch)) return 2; }
        else if (!strcmp(a, "--lr")) { if (!cli_float(a, v, 1e-9, 10, &tp.lr)) return 2; }
        else if (!strcmp(a, "--wd")) { if (!cli_float(a, v, 0, 10, &tp.weight_decay)) return 2; }
        else if (!strcmp(a, "-t")) { if (!cli_int(a, v, 1, 512, &tp.n_threads)) return 2; }
        else if (!strcmp(a, "--seed")) {
            unsigned long long s;
            if (!cli_u64(a, v, &s)) return 2;
            tp.seed = s;
        } else {
            fprintf(stderr, "error: unknown option '%s' (see specdec train accept-head --help)\n", a);
            return 2;
        }
    }
    if (!model_path || !tp.corpus_path || !out) {
        fprintf(stderr, "error: -m TARGET, --corpus FILE and --out FILE are required\n");
        return 2;
    }
    if (!draft_path == !tp.exit_layer) {
        fprintf(stderr, "error: give the drafter: --draft-model FILE or --exit-layer E (one of them)\n");
        return 2;
    }
    if (heads_path && !tp.exit_layer) {
        fprintf(stderr, "error: --exit-heads goes with --exit-layer\n");
        return 2;
    }
    tp.progress = progress;
    sd_error err;
    sd_model *m = NULL, *dm = NULL;
    sd_exit_heads *heads = NULL;
    sd_accept_head *h = NULL;
    sd_accept_train_report rep;
    int rc = 1;
    if (sd_model_load(model_path, NULL, &m, &err) != SD_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        goto done;
    }
    if (draft_path && sd_model_load(draft_path, NULL, &dm, &err) != SD_OK) {
        fprintf(stderr, "error: draft model: %s\n", err.msg);
        goto done;
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
    printf("acceptance head for %s drafting for %s: %d training / %d validation / %d held-out positions, %.1f s\n",
           draft_path ? draft_path : "early exit", model_path, rep.n_train, rep.n_val, rep.n_heldout, rep.seconds);
    printf("mean soft acceptance (held out) %.3f; weighted BCE first epoch %.4f, last %.4f; kept epoch %d\n",
           rep.mean_label, rep.loss_first, rep.loss_last, rep.kept_epoch);
    printf("held-out binary KL: %.4f before (constant predictor) -> %.4f after\n", rep.kl_before, rep.kl_after);
    printf("held-out AUC of acceptance: head %.3f, draft top-1 probability %.3f\n", rep.auc_head, rep.auc_top1);
    printf("wrote %s\n", out);
    rc = 0;
done:
    sd_accept_head_free(h);
    sd_exit_heads_free(heads);
    sd_model_free(dm);
    sd_model_free(m);
    return rc;
}
