/* specdec train exit-heads: fit the per-depth exit heads of a model on a text corpus. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_opts.h"
#include "cmds.h"
#include "specdec.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: specdec train exit-heads -m MODEL --corpus FILE --out HEADS.gguf [options]\n\n"
            "Caches the model's hidden states at every depth over the corpus (stories separated by lines\n"
            "<|endofstory|>) and fits, per depth, an affine translator (dim x dim + bias, initialised to identity)\n"
            "applied before the shared final norm + LM head, minimising KL(final || exit) with AdamW. Prints progress\n"
            "and each depth's held-out top-1 agreement with the final layer before and after. Use the heads with\n"
            "--exit-heads HEADS.gguf (early-exit methods).\n\n"
            "  --tokens N       training positions (default 48000)\n"
            "  --heldout N      held-out positions for the agreement report (default 4000; half as many more validate\n"
            "                   the checkpoint choice: every quarter epoch, the identity included)\n"
            "  --epochs N       (default 3)     --batch N  (default 32)\n"
            "  --lr X           (default 3e-4)  --wd X     weight decay toward the identity (default 0.01)\n"
            "  --depths LIST    e.g. 1,2,3 (default: every depth 1..L-1)\n"
            "  --seq-len N      longest text chunk (default 256)\n"
            "  -t N             threads; --seed S\n\n"
            "specdec train accept-head: SpecDec++'s acceptance head (see specdec train accept-head --help)\n");
}

int cmd_train(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "accept-head")) return cmd_train_accept(argc, argv);
    if (argc < 2 || strcmp(argv[1], "exit-heads")) {
        if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
            usage(stdout);
            return 0;
        }
        fprintf(stderr, "error: specdec train expects 'exit-heads' or 'accept-head' (see specdec train --help)\n");
        return 2;
    }
    sd_train_params tp = sd_train_default_params();
    const char *model_path = NULL, *out = NULL;
    int depths[256], n_dep = 0;
    const cmd_opt opts[] = {
        CMD_STR("-m", "--model", &model_path),
        CMD_STR("--corpus", NULL, &tp.corpus_path),
        CMD_STR("--out", "-o", &out),
        CMD_INT("--tokens", &tp.n_train_tokens, 16, 1 << 24),
        CMD_INT("--heldout", &tp.n_heldout_tokens, 1, 1 << 24),
        CMD_INT("--epochs", &tp.epochs, 1, 1000),
        CMD_INT("--batch", &tp.batch, 1, 1 << 16),
        CMD_FLOAT("--lr", &tp.lr, 1e-9, 10),
        CMD_FLOAT("--wd", &tp.weight_decay, 0, 10),
        CMD_INT("--seq-len", &tp.seq_len, 2, 1 << 20),
        CMD_INT("-t", &tp.n_threads, 1, 512),
        CMD_U64("--seed", &tp.seed),
        CMD_INT_LIST("--depths", depths, 1, 1 << 16, 256, &n_dep),
        CMD_OPTS_END,
    };
    int rc_opts = cmd_opts_parse(argc, argv, 2, opts, "train exit-heads", usage);
    if (rc_opts >= 0) return rc_opts;
    if (!model_path || !tp.corpus_path || !out) {
        fprintf(stderr, "error: -m MODEL, --corpus FILE and --out FILE are required\n");
        return 2;
    }
    if (n_dep) {
        tp.depths = depths;
        tp.n_depths = n_dep;
    }
    tp.progress = cmd_progress_line;
    sd_error err;
    sd_model *m = NULL;
    if (sd_model_load(model_path, NULL, &m, &err) != SD_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    sd_exit_heads *h = NULL;
    sd_train_report rep;
    int rc = 1;
    if (sd_train_exit_heads(m, &tp, &h, &rep, &err) != SD_OK || sd_exit_heads_save(h, out, &err) != SD_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        goto done;
    }
    printf("exit heads for %s: %d training / %d held-out positions, %.1f s\n\n", model_path, rep.n_train, rep.n_heldout,
           rep.seconds);
    printf("| depth | agreement before | after | KL first epoch | KL last epoch | kept |\n|---|---|---|---|---|---|\n");
    for (int d = 1; d < rep.n_layer; d++)
        if (rep.agree_after[d] >= 0)
            printf("| %d | %.3f | %.3f | %.4f | %.4f | %s |\n", d, rep.agree_before[d], rep.agree_after[d],
                   rep.loss_first[d], rep.loss_last[d], rep.kept_step[d] ? "trained head" : "identity");
    printf("\nwrote %s\n", out);
    rc = 0;
done:
    sd_exit_heads_free(h);
    sd_model_free(m);
    return rc;
}
