/* specdec bench: decode tokens/s vs the roofline, block-forward cost T(k)/T(1), and read bandwidth. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_args.h"
#include "cmds.h"
#include "specdec.h"

double cmd_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: specdec bench <decode|block|bandwidth|peak|spec|batch> [options]\n\n"
            "  spec       plain decoding vs speculative methods on a prompt set (see specdec bench spec --help)\n"
            "  batch      aggregate decode rate of P sequences at once, plain and speculative (bench batch --help)\n"
            "  decode     tokens/s of plain decoding after a short prompt, with the roofline\n"
            "             (read bandwidth / weight bytes per token) and the ratio\n"
            "  block      time of one forward over a block of k positions (logits at every position, as a\n"
            "             verification pass) at a given context length, T(k) and T(k)/T(1); and prefill tokens/s\n"
            "  bandwidth  the machine's read bandwidth with the given thread count\n"
            "  peak       the compute ceiling of each type's kernel arithmetic (operands in registers), on 1 and N\n"
            "             threads; with -m, the lower bounds it and the bandwidth put on T(k): max(bytes / bandwidth,\n"
            "             k * multiply-adds / peak)\n\n"
            "options:\n"
            "  -m, --model FILE   model (decode, block; optional for peak)\n"
            "  -t, --threads N    threads (default: online CPUs)\n"
            "  -n N               decode: tokens to time (default 64)\n"
            "  --ctx N            block: context length before the block (default 256)\n"
            "  --ks LIST          block, peak: block sizes (default 1,2,4,8,12,16)\n"
            "  --reps N           repetitions; the median is reported (default 5); block runs every k once per\n"
            "                     round and reports the median of the rounds' T(k)/T(1)\n"
            "  --bw-mib N         bandwidth buffer in MiB (default 4096; decode uses at least 4x the bytes per token)\n"
            "  --json FILE        also write the results as JSON\n"
            "  --no-mmap          read the weights into memory the process owns (the page cache of a loaded host\n"
            "                     may drop a mapping's pages between runs)\n"
            "  --mlock            lock the weights in RAM\n");
}

/* ------------------------------------------------------------------ bandwidth */
typedef struct bw_arg {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
} bw_arg;

static void *bw_read(void *a) {
    bw_arg *b = a;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
    for (size_t i = 0; i + 8 <= b->n; i += 8) {
        s0 += b->p[i]; s1 += b->p[i + 1]; s2 += b->p[i + 2]; s3 += b->p[i + 3];
        s4 += b->p[i + 4]; s5 += b->p[i + 5]; s6 += b->p[i + 6]; s7 += b->p[i + 7];
    }
    b->sum = s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7;
    return NULL;
}

static double median(double *v, int n);

/* Median-of-reps read bandwidth in bytes/s over a buffer of mib MiB split across threads (*best gets the
 * best rep: on a shared machine single reps can be far off, the median is what the roofline uses). */
static double measure_bandwidth(int threads, int mib, int reps, double *best_out) {
    size_t bytes = (size_t)mib << 20, n = bytes / 8;
    uint64_t *buf = malloc(bytes);
    if (!buf) return 0;
    for (size_t i = 0; i < n; i++) buf[i] = i;
    double best = 0, *all = malloc((size_t)reps * sizeof *all);
    pthread_t tid[512];
    bw_arg args[512];
    for (int r = 0; r < reps && all; r++) {
        double t0 = cmd_now();
        for (int t = 0; t < threads; t++) {
            size_t a = n * (size_t)t / (size_t)threads, b = n * (size_t)(t + 1) / (size_t)threads;
            args[t] = (bw_arg){buf + a, b - a, 0};
            if (t > 0) pthread_create(&tid[t], NULL, bw_read, &args[t]);
        }
        bw_read(&args[0]);
        for (int t = 1; t < threads; t++) pthread_join(tid[t], NULL);
        double dt = cmd_now() - t0;
        uint64_t s = 0;
        for (int t = 0; t < threads; t++) s += args[t].sum;
        if (s == 42) fprintf(stderr, " "); /* keep the sums alive */
        all[r] = (double)bytes / dt;
        if (all[r] > best) best = all[r];
    }
    double med = all ? median(all, reps) : 0;
    free(all);
    free(buf);
    if (best_out) *best_out = best;
    return med;
}

/* Read bandwidth for a model: a buffer well beyond its weights (>= 4x the bytes per token, >= the --bw-mib floor,
 * <= 16 GiB) so the reading is the memory level the weights stream from, not a cache. */
static double model_bandwidth(int threads, size_t decode_bytes, int floor_mib) {
    size_t mib = 4 * decode_bytes / (1 << 20);
    if (mib < (size_t)floor_mib) mib = (size_t)floor_mib;
    if (mib > 16384) mib = 16384;
    return measure_bandwidth(threads, (int)mib, 5, NULL);
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct bench_opts {
    const char *model, *json, *ks;
    int threads, n, ctx, reps, bw_mib;
    sd_model_params mp; /* --no-mmap, --mlock */
} bench_opts;

static int load(const bench_opts *o, int n_ctx, int n_batch, sd_model **m, sd_ctx **c) {
    sd_error err;
    if (sd_model_load(o->model, &o->mp, m, &err) != SD_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    sd_ctx_params cp = sd_ctx_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.n_threads = o->threads;
    if (sd_ctx_new(*m, &cp, c, &err) != SD_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        sd_model_free(*m);
        return 1;
    }
    return 0;
}

static int32_t tok_at(int i, int V) { return (int32_t)(((uint64_t)i * 2654435761u + 17) % (uint64_t)(V - 3)) + 3; }

static int bench_decode(const bench_opts *o) {
    sd_model *m;
    sd_ctx *c;
    const int P = 16;
    if (load(o, P + o->n + 8, 16, &m, &c)) return 1;
    sd_model_info info;
    sd_model_get_info(m, &info);
    float *logits = malloc((size_t)info.n_vocab * sizeof *logits);
    int32_t prompt[16];
    for (int i = 0; i < P; i++) prompt[i] = tok_at(i, info.n_vocab);
    sd_error err;
    double best_tps = 0;
    fprintf(stderr, "decode: %d tokens x %d runs (%d threads) ...\n", o->n, o->reps, sd_ctx_n_threads(c));
    double *tps = malloc((size_t)o->reps * sizeof *tps);
    for (int r = -1; r < o->reps; r++) { /* run -1 warms up (pages the weights in) */
        sd_kv_truncate(c, 0, 0, NULL);
        sd_forward(c, &(sd_block){.n = P, .token = prompt}, &(sd_forward_args){.logits = logits}, &err);
        int32_t t = tok_at(99, info.n_vocab);
        double t0 = cmd_now();
        int steps = r < 0 ? 4 : o->n;
        for (int i = 0; i < steps; i++) {
            if (sd_forward(c, &(sd_block){.n = 1, .token = &t}, &(sd_forward_args){.logits = logits}, &err) != SD_OK) {
                fprintf(stderr, "error: %s\n", err.msg);
                return 1;
            }
            int best = 0;
            for (int v = 1; v < info.n_vocab; v++)
                if (logits[v] > logits[best]) best = v;
            t = best;
        }
        double dt = cmd_now() - t0;
        if (r >= 0) tps[r] = steps / dt;
    }
    double med = median(tps, o->reps);
    best_tps = tps[o->reps - 1];
    double bw = model_bandwidth(sd_ctx_n_threads(c), info.decode_bytes, o->bw_mib);
    double roof = bw / (double)info.decode_bytes;
    printf("| model | type | threads | tok/s (median) | tok/s (best) | ms/token | MiB/token | read GB/s (median) | roofline tok/s | ratio |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|\n");
    printf("| %s | %s | %d | %.2f | %.2f | %.2f | %.1f | %.1f | %.2f | %.0f%% |\n", o->model, info.weight_type,
           sd_ctx_n_threads(c), med, best_tps, 1000.0 / med, (double)info.decode_bytes / (1 << 20), bw / 1e9, roof,
           100.0 * med / roof);
    if (o->json) {
        FILE *f = fopen(o->json, "w");
        if (f) {
            fprintf(f,
                    "{\"bench\": \"decode\", \"model\": \"%s\", \"type\": \"%s\", \"threads\": %d, \"tokens\": %d, "
                    "\"tok_s_median\": %.4f, \"tok_s_best\": %.4f, \"bytes_per_token\": %zu, \"read_bw_bytes_s\": %.0f, "
                    "\"roofline_tok_s\": %.4f, \"ratio\": %.4f}\n",
                    o->model, info.weight_type, sd_ctx_n_threads(c), o->n, med, best_tps, info.decode_bytes, bw, roof,
                    med / roof);
            fclose(f);
        }
    }
    free(tps);
    free(logits);
    sd_ctx_free(c);
    sd_model_free(m);
    return 0;
}

/* --ks: up to 32 comma-separated block sizes 1..4096 into ks; their count, or -1 (message printed) */
static int parse_ks(const char *list, int *ks) {
    int nk = 0;
    for (const char *s = list; *s && nk < 32;) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 4096) {
            fprintf(stderr, "error: --ks expects a comma-separated list of block sizes, got '%s'\n", list);
            return -1;
        }
        ks[nk++] = (int)v;
        s = *end == ',' ? end + 1 : end;
    }
    if (nk == 0) fprintf(stderr, "error: --ks is empty\n");
    return nk ? nk : -1;
}

static int bench_block(const bench_opts *o) {
    int ks[32], nk = parse_ks(o->ks, ks);
    if (nk < 0) return 2;
    int kmax = 1;
    for (int i = 0; i < nk; i++) kmax = ks[i] > kmax ? ks[i] : kmax;
    int nb = o->ctx > kmax ? o->ctx : kmax;
    sd_model *m;
    sd_ctx *c;
    if (load(o, o->ctx + kmax + 1, nb, &m, &c)) return 1;
    sd_model_info info;
    sd_model_get_info(m, &info);
    int32_t *toks = malloc((size_t)nb * sizeof *toks);
    float *logits = malloc((size_t)kmax * info.n_vocab * sizeof *logits);
    uint8_t *want = malloc((size_t)nb);
    memset(want, 1, (size_t)nb);
    for (int i = 0; i < nb; i++) toks[i] = tok_at(i, info.n_vocab);
    sd_error err;
    /* prefill of ctx tokens in one block (also warms up) */
    double pre[8];
    int npre = o->reps < 8 ? o->reps : 8;
    for (int r = -1; r < npre; r++) {
        sd_kv_truncate(c, 0, 0, NULL);
        double t0 = cmd_now();
        if (sd_forward(c, &(sd_block){.n = o->ctx, .token = toks}, &(sd_forward_args){.logits = logits}, &err)) {
            fprintf(stderr, "error: %s\n", err.msg);
            return 1;
        }
        if (r >= 0) pre[r] = o->ctx / (cmd_now() - t0);
    }
    double pre_tps = median(pre, npre);
    fprintf(stderr, "block: context %d, blocks %s, %d reps (%d threads) ...\n", o->ctx, o->ks, o->reps,
            sd_ctx_n_threads(c));
    /* rounds: each runs every k once, so the host's speed drifting between rounds (it does, by 10-20% here) moves
     * all k alike; T(k) is the median over rounds and T(k)/T(1) the median of the rounds' own ratios */
    int one = -1;
    for (int i = 0; i < nk; i++)
        if (ks[i] == 1) one = i;
    double T[32], R[32], *tt = malloc((size_t)nk * o->reps * sizeof *tt), *rr = malloc((size_t)o->reps * sizeof *rr);
    for (int r = 0; r < o->reps; r++)
        for (int ki = 0; ki < nk; ki++) {
            double t0 = cmd_now();
            sd_forward(c, &(sd_block){.n = ks[ki], .token = toks}, &(sd_forward_args){.want_logits = want, .logits = logits},
                       &err);
            tt[ki * o->reps + r] = cmd_now() - t0;
            sd_kv_truncate(c, 0, o->ctx, NULL);
        }
    for (int ki = 0; ki < nk; ki++) {
        for (int r = 0; r < o->reps && one >= 0; r++) rr[r] = tt[ki * o->reps + r] / tt[one * o->reps + r];
        R[ki] = one >= 0 ? median(rr, o->reps) : 0.0;
    }
    for (int ki = 0; ki < nk; ki++) T[ki] = median(tt + ki * o->reps, o->reps); /* (sorts: after the ratios) */
    printf("| model | type | threads | context | k | T(k) ms | T(k)/T(1) | tokens/s in the block |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < nk; i++) {
        printf("| %s | %s | %d | %d | %d | %.1f | ", o->model, info.weight_type, sd_ctx_n_threads(c), o->ctx, ks[i],
               1000 * T[i]);
        if (one >= 0) printf("%.2f", R[i]);
        else printf("-");
        printf(" | %.1f |\n", ks[i] / T[i]);
    }
    printf("\nprefill: %d tokens in one block: %.1f tokens/s\n", o->ctx, pre_tps);
    if (o->json) {
        FILE *f = fopen(o->json, "w");
        if (f) {
            fprintf(f, "{\"bench\": \"block\", \"model\": \"%s\", \"type\": \"%s\", \"threads\": %d, \"context\": %d, "
                       "\"prefill_tok_s\": %.3f, \"blocks\": [",
                    o->model, info.weight_type, sd_ctx_n_threads(c), o->ctx, pre_tps);
            for (int i = 0; i < nk; i++)
                fprintf(f, "%s{\"k\": %d, \"ms\": %.4f, \"ratio\": %.4f}", i ? ", " : "", ks[i], 1000 * T[i], R[i]);
            fprintf(f, "]}\n");
            fclose(f);
        }
    }
    free(tt);
    free(rr);
    free(toks);
    free(logits);
    free(want);
    sd_ctx_free(c);
    sd_model_free(m);
    return 0;
}

/* ------------------------------------------------------------------ peak */
static const char *const PEAK_TYPES[] = {"f32", "f16", "bf16", "q8_0", "q4_0"};
static const char *const PEAK_STEPS[] = {
    "4 rows x 3 positions x 8 columns: 12 FMAs",
    "3 rows x 4 positions x 8 columns: convert 3 weight vectors, 12 FMAs",
    "3 rows x 4 positions x 8 columns: convert 3 weight vectors, 12 FMAs",
    "32-block, 2 rows x 4 positions: integer pair sums, widen, convert, 1 FMA each",
    "32-block, 2 rows x 4 positions: integer pair sums, widen, convert, 1 FMA each",
};

static int bench_peak(const bench_opts *o) {
    int ks[32], nk = parse_ks(o->ks, ks);
    if (nk < 0) return 2;
    sd_model *m = NULL;
    sd_model_info info = {0};
    if (o->model) {
        sd_error err;
        if (sd_model_load(o->model, &o->mp, &m, &err) != SD_OK) {
            fprintf(stderr, "error: %s\n", err.msg);
            return 1;
        }
        sd_model_get_info(m, &info);
    }
    fprintf(stderr, "peak: kernel arithmetic with operands in registers, 1 and %d threads ...\n", o->threads);
    double pk1[5], pkn[5];
    printf("| type | inner step | GMAC/s, 1 thread | GMAC/s, %d threads |\n|---|---|---|---|\n", o->threads);
    for (int i = 0; i < 5; i++) {
        pk1[i] = sd_kernel_peak(PEAK_TYPES[i], 1, 0.2);
        pkn[i] = o->threads > 1 ? sd_kernel_peak(PEAK_TYPES[i], o->threads, 0.2) : pk1[i];
        if (pk1[i] < 0 || pkn[i] < 0) {
            fprintf(stderr, "error: could not start %d threads\n", o->threads);
            sd_model_free(m);
            return 1;
        }
        if (pk1[i] == 0) printf("| %s | (scalar kernels: not measured) | - | - |\n", PEAK_TYPES[i]);
        else printf("| %s | %s | %.1f | %.1f |\n", PEAK_TYPES[i], PEAK_STEPS[i], pk1[i] / 1e9, pkn[i] / 1e9);
    }
    int ti = -1;
    for (int i = 0; m && i < 5; i++)
        if (!strcmp(info.weight_type, PEAK_TYPES[i])) ti = i;
    FILE *jf = o->json ? fopen(o->json, "w") : NULL;
    if (o->json && !jf) fprintf(stderr, "warning: cannot write %s\n", o->json);
    if (jf) {
        fprintf(jf, "{\"bench\": \"peak\", \"threads\": %d, \"peaks\": [", o->threads);
        for (int i = 0; i < 5; i++)
            fprintf(jf, "%s{\"type\": \"%s\", \"macs_s_1\": %.0f, \"macs_s_n\": %.0f}", i ? ", " : "", PEAK_TYPES[i],
                    pk1[i], pkn[i]);
        fprintf(jf, "]");
    }
    if (m && ti >= 0 && pkn[ti] > 0) {
        double bw = model_bandwidth(o->threads, info.decode_bytes, o->bw_mib);
        double t_mem = (double)info.decode_bytes / bw;
        printf("\nLower bounds for %s (%s, %d threads): %.3f GMAC and %.1f MiB of weights per position, read %.1f "
               "GB/s, peak %.1f GMAC/s (attention, norms and the rest not counted)\n\n",
               o->model, info.weight_type, o->threads, (double)info.matmul_macs / 1e9,
               (double)info.decode_bytes / (1 << 20), bw / 1e9, pkn[ti] / 1e9);
        printf("| k | bytes / bandwidth ms | k x MACs / peak ms | bound T(k) ms | bound T(k) / bound T(1) |\n");
        printf("|---|---|---|---|---|\n");
        double t1 = t_mem > info.matmul_macs / pkn[ti] ? t_mem : info.matmul_macs / pkn[ti]; /* bound T(1) */
        if (jf)
            fprintf(jf, ", \"model\": \"%s\", \"type\": \"%s\", \"macs_per_token\": %" PRIu64
                        ", \"bytes_per_token\": %zu, \"read_bw_bytes_s\": %.0f, \"bounds\": [",
                    o->model, info.weight_type, info.matmul_macs, info.decode_bytes, bw);
        for (int i = 0; i < nk; i++) {
            double t_cmp = ks[i] * (double)info.matmul_macs / pkn[ti];
            double tb = t_mem > t_cmp ? t_mem : t_cmp;
            printf("| %d | %.3g | %.3g | %.3g | %.2f |\n", ks[i], 1e3 * t_mem, 1e3 * t_cmp, 1e3 * tb, tb / t1);
            if (jf) fprintf(jf, "%s{\"k\": %d, \"bound_ms\": %.4f}", i ? ", " : "", ks[i], 1e3 * tb);
        }
        if (jf) fprintf(jf, "]");
    } else if (m) {
        printf("\n(no bound: the model's type %s has no measured step with these kernels)\n", info.weight_type);
    }
    if (jf) {
        fprintf(jf, "}\n");
        fclose(jf);
    }
    sd_model_free(m);
    return 0;
}

int cmd_bench(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *what = argv[1];
    if (!strcmp(what, "spec")) return cmd_bench_spec(argc - 1, argv + 1);
    if (!strcmp(what, "batch")) return cmd_bench_batch(argc - 1, argv + 1);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    bench_opts o = {.ks = "1,2,4,8,12,16", .threads = ncpu > 0 ? (int)ncpu : 1, .n = 64, .ctx = 256, .reps = 5,
                    .bw_mib = 4096, .mp = sd_model_default_params()};
    static const char *const flags[] = {"--no-mmap", "--mlock", NULL};
    for (int i = 2; i < argc; i++) {
        const char *a, *v;
        int tk = cli_take(argc, argv, &i, &a, &v, "bench", flags, usage);
        if (tk >= 0) return tk;
        if (!strcmp(a, "--no-mmap")) o.mp.no_mmap = true;
        else if (!strcmp(a, "--mlock")) o.mp.mlock = true;
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) o.model = v;
        else if (!strcmp(a, "--json")) o.json = v;
        else if (!strcmp(a, "--ks")) o.ks = v;
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { if (!cli_int(a, v, 1, 512, &o.threads)) return 2; }
        else if (!strcmp(a, "-n")) { if (!cli_int(a, v, 1, 100000, &o.n)) return 2; }
        else if (!strcmp(a, "--ctx")) { if (!cli_int(a, v, 1, 1 << 20, &o.ctx)) return 2; }
        else if (!strcmp(a, "--reps")) { if (!cli_int(a, v, 1, 1000, &o.reps)) return 2; }
        else if (!strcmp(a, "--bw-mib")) { if (!cli_int(a, v, 16, 1 << 16, &o.bw_mib)) return 2; }
        else {
            fprintf(stderr, "error: unknown option '%s' (see specdec bench --help)\n", a);
            return 2;
        }
    }
    if (!strcmp(what, "bandwidth")) {
        double best;
        double bw = measure_bandwidth(o.threads, o.bw_mib, o.reps, &best);
        printf("| threads | buffer MiB | read GB/s (median of %d) | best |\n|---|---|---|---|\n| %d | %d | %.2f | %.2f |\n",
               o.reps, o.threads, o.bw_mib, bw / 1e9, best / 1e9);
        if (o.json) {
            FILE *f = fopen(o.json, "w");
            if (f) {
                fprintf(f, "{\"bench\": \"bandwidth\", \"threads\": %d, \"read_bw_bytes_s\": %.0f}\n", o.threads, bw);
                fclose(f);
            }
        }
        return 0;
    }
    if (!strcmp(what, "peak")) return bench_peak(&o);
    if (strcmp(what, "decode") && strcmp(what, "block")) {
        fprintf(stderr, "error: unknown benchmark '%s' (decode, block, bandwidth, peak, spec, batch)\n", what);
        return 2;
    }
    if (!o.model) {
        fprintf(stderr, "error: bench %s needs -m MODEL\n", what);
        return 2;
    }
    return !strcmp(what, "decode") ? bench_decode(&o) : bench_block(&o);
}
