/* specdec train exit-heads: fit the per-depth exit heads of a model on a text corpus. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
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

static void progress(void *user, const char *line) {
    (void)user;
    fprintf(stderr, "%s\n", line);
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
    for (int i = 2; i < argc; i++) {
        const char *a, *v;
        int tk = cli_take(argc, argv, &i, &a, &v, "train exit-heads", NULL, usage);
        if (tk >= 0) return tk;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_path = v;
        else if (!strcmp(a, "--corpus")) tp.corpus_path = v;
        else if (!strcmp(a, "--out") || !strcmp(a, "-o")) out = v;
        else if (!strcmp(a, "--tokens")) { if (!cli_int(a, v, 16, 1 << 24, &tp.n_train_tokens)) return 2; }
        else if (!strcmp(a, "--heldout")) { if (!cli_int(a, v, 1, 1 << 24, &tp.n_heldout_tokens)) return 2; }
        else if (!strcmp(a, "--epochs")) { if (!cli_int(a, v, 1, 1000, &tp.epochs)) return 2; }
        else if (!strcmp(a, "--batch")) { if (!cli_int(a, v, 1, 1 << 16, &tp.batch)) return 2; }
        else if (!strcmp(a, "--lr")) { if (!cli_float(a, v, 1e-9, 10, &tp.lr)) return 2; }
        else if (!strcmp(a, "--wd")) { if (!cli_float(a, v, 0, 10, &tp.weight_decay)) return 2; }
        else if (!strcmp(a, "--seq-len")) { if (!cli_int(a, v, 2, 1 << 20, &tp.seq_len)) return 2; }
        else if (!strcmp(a, "-t")) { if (!cli_int(a, v, 1, 512, &tp.n_threads)) return 2; }
        else if (!strcmp(a, "--seed")) {
            unsigned long long s;
            if (!cli_u64(a, v, &s)) return 2;
            tp.seed = s;
        } else if (!strcmp(a, "--depths")) {
            if (!cli_int_list(a, v, 1, 1 << 16, 256, depths, &n_dep)) return 2;
        } else {
            fprintf(stderr, "error: unknown option '%s' (see specdec train exit-heads --help)\n", a);
            return 2;
        }
    }
    if (!model_path || !tp.corpus_path || !out) {
        fprintf(stderr, "error: -m MODEL, --corpus FILE and --out FILE are required\n");
        return 2;
    }
    if (n_dep) {
        tp.depths = depths;
        tp.n_depths = n_dep;
    }
    tp.progress = progress;
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
