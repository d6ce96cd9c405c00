/* Every kernel table (AVX2 when the CPU has it) against the scalar reference: all weight types, blocks of
 * 1..16 positions, odd shapes and row ranges. Error is normalised by sum_c |w_c x_c| of the output. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/wtype.h"
#include "kernels/kern.h"
#include "kernels/kquant.h"
#include "util/fp16.h"
#include "testlib.h"

static uint64_t rs = 88172645463325252ull;
static float frand(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (float)((rs >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

/* Builds rows x cols weights of a type from random floats in [-1, 1]. */
static unsigned char *make_weights(uint32_t type, int rows, int cols) {
    size_t rb = ggml_row_bytes(type, cols);
    unsigned char *w = calloc((size_t)rows, rb);
    for (int r = 0; r < rows; r++) {
        unsigned char *row = w + (size_t)r * rb;
        float v[8192];
        for (int c = 0; c < cols; c++) v[c] = frand();
        if (kq_is_kquant(type)) wtype_get(type)->from_float(v, row, cols); /* the reference quantiser */
        if (type == GGML_F32) memcpy(row, v, (size_t)cols * 4);
        for (int c = 0; c < cols && (type == GGML_F16 || type == GGML_BF16); c++) {
            uint16_t h = type == GGML_F16 ? f32_to_fp16(v[c]) : f32_to_bf16(v[c]);
            memcpy(row + 2 * c, &h, 2);
        }
        for (int b = 0; b < cols / 32 && (type == GGML_Q8_0 || type == GGML_Q4_0); b++) {
            float amax = 0;
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(v[32 * b + j]));
            if (type == GGML_Q8_0) {
                float d = amax / 127;
                uint16_t h = f32_to_fp16(d);
                memcpy(row + 34 * b, &h, 2);
                for (int j = 0; j < 32; j++) row[34 * b + 2 + j] = (unsigned char)(int8_t)roundf(d ? v[32 * b + j] / d : 0);
            } else {
                float d = amax / 8;
                uint16_t h = f32_to_fp16(d);
                memcpy(row + 18 * b, &h, 2);
                for (int j = 0; j < 16; j++) {
                    int lo = (int)roundf(d ? v[32 * b + j] / d : 0) + 8, hi = (int)roundf(d ? v[32 * b + 16 + j] / d : 0) + 8;
                    lo = lo < 0 ? 0 : lo > 15 ? 15 : lo;
                    hi = hi < 0 ? 0 : hi > 15 ? 15 : hi;
                    row[18 * b + 2 + j] = (unsigned char)(lo | (hi << 4));
                }
            }
        }
    }
    return w;
}

/* ops against the scalar reference; same (NULL: none): a table whose bits ops must equal for every output */
static void check_type(const kern_ops *ops, uint32_t type, const kern_ops *same) {
    const kern_ops *ref = kern_scalar();
    int shapes[][2] = {{1, 32}, {7, 64}, {37, 96}, {64, 256}, {13, 1024}, {5, 33}, {9, 172}, {3, 7}, {1, 256}, {11, 768},
                       {19, 4160}, {8, 2080}, {10, 2304}}; /* the last three: past the quantized kernels' column chunks */
    double worst = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int rows = shapes[si][0], cols = shapes[si][1];
        const wtype_info *ti = wtype_get(type);
        if (cols % ti->block_elems) continue;
        unsigned char *w = make_weights(type, rows, cols);
        size_t rb = ggml_row_bytes(type, cols);
        /* blocks 1..16, and around and past the kernels' 32-position groups */
        static const int blocks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 31, 33, 40, 47, 48, 64, 257};
        for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++) {
            int n = blocks[bi];
            float *x = malloc((size_t)n * cols * sizeof *x);
            for (int i = 0; i < n * cols; i++) x[i] = frand();
            const void *xin = x;
            size_t xs = (size_t)cols * sizeof(float);
            act_q8 *xq = NULL;
            act_q8k *xk = NULL;
            if (ti->act == WT_ACT_Q8_0) {
                xq = malloc((size_t)n * (cols / 32) * sizeof *xq);
                for (int p = 0; p < n; p++) kern_quantize_q8(x + (size_t)p * cols, cols, xq + (size_t)p * (cols / 32));
                xin = xq;
                xs = (size_t)(cols / 32) * sizeof *xq;
            } else if (ti->act == WT_ACT_Q8_K) {
                xk = malloc((size_t)n * (cols / QK_K) * sizeof *xk);
                for (int p = 0; p < n; p++) kern_quantize_q8k(x + (size_t)p * cols, cols, xk + (size_t)p * (cols / QK_K));
                xin = xk;
                xs = (size_t)(cols / QK_K) * sizeof *xk;
            }
            float *y0 = calloc((size_t)n * rows, sizeof *y0), *y1 = calloc((size_t)n * rows, sizeof *y1);
            float *y2 = calloc((size_t)n * rows, sizeof *y2);
            ref->mm[type](w, rb, cols, xin, xs, n, y0, rows, 0, rows);
            ops->mm[type](w, rb, cols, xin, xs, n, y1, rows, 0, rows);
            /* split rows at an odd point: the same bits must come out (thread split invariance) */
            int mid = rows / 2 + (rows > 2);
            ops->mm[type](w, rb, cols, xin, xs, n, y2, rows, 0, mid);
            ops->mm[type](w, rb, cols, xin, xs, n, y2, rows, mid, rows);
            CHECK(memcmp(y1, y2, (size_t)n * rows * sizeof *y1) == 0, "%s %s: row split changes bits (%dx%d n=%d)",
                  ops->name, ggml_type_name(type), rows, cols, n);
            if (same) {
                same->mm[type](w, rb, cols, xin, xs, n, y2, rows, 0, rows);
                CHECK(memcmp(y1, y2, (size_t)n * rows * sizeof *y1) == 0, "%s %s: differs from the %s bits (%dx%d n=%d)",
                      ops->name, ggml_type_name(type), same->name, rows, cols, n);
            }
            /* block invariance: each position alone gives the bits it gets inside the block */
            for (int p = 0; p < n; p++) {
                float *ys = calloc((size_t)rows, sizeof *ys);
                ops->mm[type](w, rb, cols, (const char *)xin + p * xs, xs, 1, ys, rows, 0, rows);
                CHECK(memcmp(ys, y1 + (size_t)p * rows, (size_t)rows * sizeof *ys) == 0,
                      "%s %s: position %d of a block of %d differs from alone", ops->name, ggml_type_name(type), p, n);
                free(ys);
            }
            for (int p = 0; p < n; p++)
                for (int r = 0; r < rows; r++) {
                    double d = fabs((double)y0[p * rows + r] - y1[p * rows + r]);
                    double scale = 1e-6 + sqrt((double)cols); /* |x|,|w| <= 1: sum |w x| ~ cols/4; bound with sqrt */
                    if (d / scale > worst) worst = d / scale;
                }
            free(x);
            free(xq);
            free(xk);
            if (ti->act != WT_ACT_F32 && type != GGML_Q8_0) /* q4_0, K-quants: one chain per output, the scalar order */
                CHECK(memcmp(y0, y1, (size_t)n * rows * sizeof *y0) == 0, "%s %s: differs from the scalar bits (%dx%d n=%d)",
                      ops->name, ggml_type_name(type), rows, cols, n);
            free(y0);
            free(y1);
            free(y2);
        }
        free(w);
    }
    double tol = 1e-5;
    CHECK(worst <= tol, "%s %s vs scalar: normalised error %.3g > %.0e", ops->name, ggml_type_name(type), worst, tol);
    printf("  %-6s %-5s max |simd - scalar| / sqrt(cols) = %.2e (tolerance %.0e)\n", ops->name, ggml_type_name(type),
           worst, tol);
}

/* Attention helpers: att_scores equals dot() per (head, key) and att_mix equals axpy() per key in order, bit for bit,
 * for 1..8 heads at once (threes, twos, ones), head sizes with and without an 8-multiple, contiguous cells and a cell list, counts around
 * the 4-key groups. */
static void check_attention(const kern_ops *ops) {
    enum { STRIDE = 200, NCELL = 40, MAXH = 8, LD = 48 };
    float *kv = malloc(sizeof(float) * STRIDE * NCELL); /* [NCELL][STRIDE] */
    for (int i = 0; i < STRIDE * NCELL; i++) kv[i] = frand();
    const int hds[] = {1, 7, 8, 12, 16, 40, 64, 72, 128, 136};
    const int cells[] = {3, 4, 9, 10, 11, 20, 31, 39};
    int bad = 0;
    for (size_t h = 0; h < sizeof hds / sizeof hds[0]; h++) {
        int hd = hds[h];
        static float q[MAXH * 136], p[MAXH * LD], out[MAXH * LD], o0[MAXH * 136], o1[MAXH * 136];
        for (int e = 0; e < MAXH * hd; e++) q[e] = frand();
        for (int j = 0; j < MAXH * LD; j++) p[j] = frand();
        for (int nh = 1; nh <= MAXH; nh++)
            for (int n = 0; n <= 9; n++)
                for (int list = 0; list < 2; list++) {
                    if (list && n > 8) continue;
                    const int *cl = list ? cells : NULL;
                    ops->att_scores(q, nh, kv, STRIDE, cl, n, hd, 0.125f, out, LD);
                    for (int e = 0; e < nh * hd; e++) o0[e] = o1[e] = 0.01f * (float)e;
                    ops->att_mix(o0, nh, p, LD, kv, STRIDE, cl, n, hd);
                    for (int g = 0; g < nh; g++)
                        for (int j = 0; j < n; j++) {
                            const float *row = kv + (size_t)(cl ? cl[j] : j) * STRIDE;
                            float want = ops->dot(q + g * hd, row, hd) * 0.125f;
                            if (memcmp(&want, &out[g * LD + j], sizeof want) != 0) bad++;
                            ops->axpy(o1 + g * hd, p[g * LD + j], row, hd);
                        }
                    if (memcmp(o0, o1, sizeof(float) * (size_t)(nh * hd)) != 0) bad++;
                }
    }
    /* a long contiguous run (the common case: the whole prefix of the context) */
    float q[64], out[NCELL], o0[64] = {0}, o1[64] = {0};
    for (int e = 0; e < 64; e++) q[e] = frand();
    ops->att_scores(q, 1, kv, STRIDE, NULL, NCELL, 64, 1.0f, out, NCELL);
    ops->att_mix(o0, 1, out, NCELL, kv, STRIDE, NULL, NCELL, 64);
    for (int j = 0; j < NCELL; j++) {
        if (ops->dot(q, kv + (size_t)j * STRIDE, 64) != out[j]) bad++;
        ops->axpy(o1, out[j], kv + (size_t)j * STRIDE, 64);
    }
    if (memcmp(o0, o1, sizeof o0) != 0) bad++;
    CHECK(bad == 0, "%s attention helpers: %d results differ from dot/axpy per key", ops->name, bad);
    free(kv);
}

/* ulps between two floats of the same sign (0 when equal) */
static double ulps(float a, float b) {
    if (a == b) return 0;
    float m = fmaxf(fabsf(a), fabsf(b));
    return fabs((double)a - b) / (double)(nextafterf(m, INFINITY) - m);
}

/* softmax and silu_mul against the scalar table (libm expf): exp within 2 ulp over the range softmax feeds it
 * ([-87, 0]: s[0] - max with max = 0), the sums and silu values within a few ulp, 0 below the normal floats. */
static void check_softmax_silu(const kern_ops *ops) {
    const kern_ops *ref = kern_scalar();
    double worst_exp = 0, worst_sum = 0, worst_silu = 0;
    for (int i = 0; i <= 20000; i++) {
        float x = -87.0f * (float)i / 20000.0f, s[2] = {x, 0.0f};
        ops->softmax(s, 2);
        double u = ulps(s[0], expf(x));
        if (u > worst_exp) worst_exp = u;
    }
    float big[2] = {-200.0f, 0.0f};
    ops->softmax(big, 2);
    CHECK(big[0] == 0.0f && big[1] == 1.0f, "%s softmax: exp(-200) = %g, exp(0) = %g", ops->name, big[0], big[1]);
    for (int n = 1; n <= 300; n += (n < 20 ? 1 : 37)) {
        float a[300], b[300];
        for (int i = 0; i < n; i++) a[i] = b[i] = 20.0f * frand();
        float sa = ops->softmax(a, n), sb = ref->softmax(b, n);
        double d = fabs((double)sa - sb) / sb;
        if (d > worst_sum) worst_sum = d;
        for (int i = 0; i < n; i++) {
            double e = fabs((double)a[i] - b[i]) / sb;
            if (e > worst_sum) worst_sum = e;
        }
    }
    for (int n = 1; n <= 40; n++) {
        float g[40], h[40], u[40];
        for (int i = 0; i < n; i++) g[i] = h[i] = 30.0f * frand(), u[i] = frand();
        ops->silu_mul(g, u, (size_t)n);
        ref->silu_mul(h, u, (size_t)n);
        for (int i = 0; i < n; i++) {
            double e = fabs((double)g[i] - h[i]) / (1e-30 + fabs((double)h[i]));
            if (fabs((double)h[i]) > 1e-30 && e > worst_silu) worst_silu = e;
        }
    }
    /* rmsnorm: against the scalar table, odd lengths, in place */
    double worst_norm = 0;
    for (int n = 1; n <= 300; n += 13) {
        float x[300], g[300], o1[300], o2[300];
        for (int i = 0; i < n; i++) x[i] = 4.0f * frand(), g[i] = frand();
        ref->rmsnorm(x, g, n, 1e-5f, o1);
        memcpy(o2, x, sizeof(float) * (size_t)n);
        ops->rmsnorm(o2, g, n, 1e-5f, o2);
        for (int i = 0; i < n; i++) {
            double e = fabs((double)o1[i] - o2[i]) / (1e-6 + fabs((double)o1[i]));
            if (e > worst_norm) worst_norm = e;
        }
    }
    CHECK(worst_norm <= 2e-6, "%s rmsnorm: relative difference %.3g from the scalar table", ops->name, worst_norm);
    CHECK(worst_exp <= 2, "%s softmax: exp %.1f ulp from expf", ops->name, worst_exp);
    CHECK(worst_sum <= 1e-6, "%s softmax: relative difference %.3g from the scalar table", ops->name, worst_sum);
    CHECK(worst_silu <= 1e-6, "%s silu_mul: relative difference %.3g from the scalar table", ops->name, worst_silu);
    printf("  %-6s exp %.1f ulp, softmax %.2e, silu %.2e (relative, vs libm expf)\n", ops->name, worst_exp, worst_sum,
           worst_silu);
}

/* quantize_q8 of a table against the reference kern_quantize_q8, every byte: random blocks, exact halves (amax 127
 * makes the scale 1, so x.5 values are ties), zeros, one large value. */
static void check_quantize(const kern_ops *ops) {
    enum { NB = 64 };
    float x[32 * NB];
    for (int i = 0; i < 32 * NB; i++) x[i] = 3.0f * frand();
    for (int j = 0; j < 32; j++) x[32 + j] = (float)(j - 16) + 0.5f; /* block 1: ties, amax 127 below */
    x[32] = 127.0f;
    for (int j = 0; j < 32; j++) x[64 + j] = 0.0f;                 /* block 2: all zero */
    x[96 + 5] = 1e30f;                                              /* block 3: one huge value */
    act_q8 a[NB], b[NB];
    memset(a, 0x55, sizeof a);
    memset(b, 0x55, sizeof b);
    kern_quantize_q8(x, 32 * NB, a);
    ops->quantize_q8(x, 32 * NB, b);
    CHECK(memcmp(a, b, sizeof a) == 0, "%s quantize_q8 differs from the reference", ops->name);
    /* Q8_K: random blocks, exact halves (the largest value 127 makes the scale -1: x.5 values are ties, rounded half
     * to even), zeros, one huge value, the largest magnitude twice with both signs (the first gives the sign) */
    enum { NK = 8 };
    float z[QK_K * NK];
    for (int i = 0; i < QK_K * NK; i++) z[i] = 3.0f * frand();
    for (int j = 0; j < QK_K; j++) z[QK_K + j] = (float)(j % 100 - 50) + 0.5f;
    z[QK_K + 7] = -127.0f;
    for (int j = 0; j < QK_K; j++) z[2 * QK_K + j] = 0.0f;
    z[3 * QK_K + 200] = 1e30f;
    z[4 * QK_K + 10] = -5.0f, z[4 * QK_K + 90] = 5.0f;
    z[5 * QK_K + 10] = 5.0f, z[5 * QK_K + 90] = -5.0f;
    act_q8k ka[NK], kb[NK];
    memset(ka, 0x55, sizeof ka);
    memset(kb, 0x55, sizeof kb);
    kern_quantize_q8k(z, QK_K * NK, ka);
    ops->quantize_q8k(z, QK_K * NK, kb);
    CHECK(memcmp(ka, kb, sizeof ka) == 0, "%s quantize_q8k differs from the reference", ops->name);
}

/* K-quants: pack/unpack round trip of random fields (every bit of the layouts), the reference quantiser's error on
 * random rows (relative RMS below a bound per type, zero rows exact), Q8_K activations, and the kernel's value equal
 * to the dot of the dequantised row (to_float) with the dequantised activations. */
static void check_kquant(void) {
    static const uint32_t T[] = {GGML_Q2_K, GGML_Q3_K, GGML_Q4_K, GGML_Q5_K, GGML_Q6_K};
    static const int bits[] = {2, 3, 4, 5, 6};
    static const double max_rel[] = {0.32, 0.22, 0.11, 0.055, 0.035}; /* relative RMS bounds (uniform data) */
    enum { COLS = 768 };
    for (int ti = 0; ti < 5; ti++) {
        const uint32_t t = T[ti];
        const wtype_info *w = wtype_get(t);
        /* round trip of fields in range */
        int bad = 0;
        for (int it = 0; it < 50; it++) {
            kq_fields f, g;
            memset(&f, 0, sizeof f);
            for (int i = 0; i < QK_K; i++) f.u[i] = (uint8_t)((rs = rs * 6364136223846793005ull + 1442695040888963407ull) >> 33) % (1u << bits[ti]);
            for (int k = 0; k < 16; k++) {
                int r = (int)(((rs = rs * 6364136223846793005ull + 1) >> 33) & 0xffff);
                int m = (int)(((rs = rs * 6364136223846793005ull + 1) >> 33) & 0xffff);
                int gk = (t == GGML_Q4_K || t == GGML_Q5_K) ? k & ~1 : k; /* 32-groups: both halves share */
                if (gk != k) {
                    f.sc[k] = f.sc[gk], f.mn[k] = f.mn[gk];
                    continue;
                }
                switch (t) {
                case GGML_Q2_K: f.sc[k] = (int16_t)(r % 16), f.mn[k] = (int16_t)(m % 16); break;
                case GGML_Q3_K: f.sc[k] = (int16_t)(r % 64 - 32); break;
                case GGML_Q6_K: f.sc[k] = (int16_t)(r % 256 - 128); break;
                default: f.sc[k] = (int16_t)(r % 64), f.mn[k] = (int16_t)(m % 64); break;
                }
            }
            f.d = fp16_to_f32(f32_to_fp16(0.01f * (float)(it + 1)));
            f.dmin = (t == GGML_Q3_K || t == GGML_Q6_K) ? 0 : fp16_to_f32(f32_to_fp16(0.003f * (float)(it + 2)));
            unsigned char blk[256];
            kq_pack(t, &f, blk);
            kq_unpack(t, blk, &g);
            bad += memcmp(f.u, g.u, sizeof f.u) || memcmp(f.sc, g.sc, sizeof f.sc) || memcmp(f.mn, g.mn, sizeof f.mn) ||
                   f.d != g.d || f.dmin != g.dmin;
        }
        CHECK(bad == 0, "%s: %d of 50 blocks do not survive pack/unpack", w->name, bad);
        /* quantiser error on random rows: uniform, gaussian-like (sum of uniforms), one outlier per block */
        float x[COLS], y[COLS];
        unsigned char q[COLS / QK_K * 256];
        double worst = 0;
        for (int kind = 0; kind < 3; kind++) {
            for (int c = 0; c < COLS; c++) {
                x[c] = kind == 0 ? frand() : (frand() + frand() + frand()) * 0.5f;
                if (kind == 2 && c % 256 == 7) x[c] = 8.0f;
            }
            w->from_float(x, q, COLS);
            w->to_float(q, y, COLS);
            double se = 0, ss = 0;
            for (int c = 0; c < COLS; c++) se += (double)(x[c] - y[c]) * (x[c] - y[c]), ss += (double)x[c] * x[c];
            double rel = sqrt(se / ss);
            if (rel > worst) worst = rel;
        }
        CHECK(worst <= max_rel[ti], "%s: quantiser relative RMS error %.3g > %.3g", w->name, worst, max_rel[ti]);
        for (int c = 0; c < COLS; c++) x[c] = 0;
        w->from_float(x, q, COLS);
        w->to_float(q, y, COLS);
        int nz = 0;
        for (int c = 0; c < COLS; c++) nz += y[c] != 0;
        CHECK(nz == 0, "%s: a zero row does not come back as zeros", w->name);
        /* the kernel computes the dot of what to_float gives with the activations' values */
        for (int c = 0; c < COLS; c++) x[c] = frand();
        w->from_float(x, q, COLS);
        w->to_float(q, y, COLS);
        float a[COLS];
        for (int c = 0; c < COLS; c++) a[c] = frand() * 3.0f;
        act_q8k xk[COLS / QK_K];
        kern_quantize_q8k(a, COLS, xk);
        double ref = 0, qerr = 0;
        for (int c = 0; c < COLS; c++) {
            double av = (double)xk[c / QK_K].d * xk[c / QK_K].qs[c % QK_K];
            ref += (double)y[c] * av;
            qerr = fmax(qerr, fabs(av - a[c]) / (3.0 / 127));
        }
        CHECK(qerr <= 0.5 + 1e-3, "%s: Q8_K activation error %.3g steps", w->name, qerr);
        float out = 0;
        kern_scalar()->mm[t](q, ggml_row_bytes(t, COLS), COLS, xk, sizeof xk, 1, &out, 1, 0, 1);
        CHECK(fabs(out - ref) <= 1e-4 * (1 + fabs(ref)), "%s: kernel %.6g vs dequantised dot %.6g", w->name, out, ref);
        printf("  %-5s quantiser relative RMS error %.3g (bound %.3g), kernel vs dequantised dot %.2g\n", w->name, worst,
               max_rel[ti], fabs(out - ref));
    }
    /* Q8_K: bsums are the group sums; |q| <= 127; the largest magnitude maps to -127 */
    float a[QK_K];
    for (int c = 0; c < QK_K; c++) a[c] = frand();
    a[100] = 2.0f;
    act_q8k k;
    kern_quantize_q8k(a, QK_K, &k);
    int bad = k.qs[100] != -127;
    for (int g = 0; g < 16; g++) {
        int sum = 0;
        for (int l = 0; l < 16; l++) sum += k.qs[16 * g + l];
        bad += sum != k.bsums[g];
    }
    CHECK(bad == 0, "Q8_K block malformed (%d)", bad);
}

int main(void) {
    int nt = 0;
    const kern_ops *a = kern_avx2();
    uint32_t types[] = {GGML_F32, GGML_F16, GGML_BF16, GGML_Q8_0, GGML_Q4_0,
                        GGML_Q2_K, GGML_Q3_K, GGML_Q4_K, GGML_Q5_K, GGML_Q6_K};
    const kern_ops *a5 = kern_avx512();
    if (!a) printf("  (no AVX2 on this CPU: checking the scalar table against itself)\n");
    if (!a5) printf("  (no AVX-512 on this CPU: the avx512 table is not checked)\n");
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) check_type(a ? a : kern_scalar(), types[i], NULL);
    /* avx512: every output the avx2 table's bits */
    for (size_t i = 0; a5 && i < sizeof types / sizeof types[0]; i++) check_type(a5, types[i], a);
    check_kquant();
    check_attention(kern_scalar());
    if (a) check_attention(a);
    check_softmax_silu(a ? a : kern_scalar());
    check_quantize(a ? a : kern_scalar());
    /* the type table: names unique and listed in wtype_names, found by name in either case, layouts consistent */
    for (const wtype_info *t; (t = wtype_at(nt)) != NULL; nt++) {
        uint32_t ty = 999;
        char up[16];
        snprintf(up, sizeof up, "%s", t->name);
        for (char *c = up; *c; c++) *c = (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
        CHECK(wtype_from_name(t->name, &ty) && ty == t->type, "%s not found by name", t->name);
        CHECK(wtype_from_name(up, &ty) && ty == t->type, "%s not found by upper-case name", up);
        CHECK(strstr(wtype_names(), t->name) != NULL, "wtype_names() lacks %s", t->name);
        CHECK(wtype_get(t->type) == t && ggml_row_bytes(t->type, 256 * t->block_elems) == (size_t)256 * t->block_bytes,
              "%s: table lookup or row bytes wrong", t->name);
        CHECK(t->to_float && t->from_float && kern_scalar()->mm[t->type], "%s: missing conversion or scalar kernel", t->name);
        CHECK(!a || a->mm[t->type], "%s: missing AVX2 kernel", t->name);
        CHECK(!a5 || a5->mm[t->type], "%s: missing AVX-512 kernel", t->name);
    }
    CHECK(!wtype_from_name("q4_2", &(uint32_t){0}), "an unknown name was accepted");
    /* fp16 conversion round trips every half value */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = fp16_to_f32((uint16_t)h);
        if (f == f && f32_to_fp16(f) != h) bad++;
    }
    CHECK(bad == 0, "%d fp16 values do not round-trip", bad);
    return tl_finish("test_kernels");
}
