#include "kernels/kquant.h"

#include <math.h>
#include <string.h>

#include "util/fp16.h"

bool kq_is_kquant(uint32_t type) { return type >= GGML_Q2_K && type <= GGML_Q6_K; }

int kq_offset(uint32_t type) { return type == GGML_Q3_K ? 4 : type == GGML_Q6_K ? 32 : 0; }

static float ld_half(const unsigned char *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return fp16_to_f32(h);
}
static void st_half(unsigned char *p, float v) {
    uint16_t h = f32_to_fp16(v);
    memcpy(p, &h, 2);
}

/* Q4_K / Q5_K: 8 (scale, min) pairs of 6 bits in 12 bytes: pairs 0..3 in the low 6 bits of bytes s and s + 4;
 * pairs 4..7 in the nibbles of byte s + 4, their top 2 bits in the top bits of bytes s - 4 (scale) and s (min) */
static void get_scale_min_k4(int s, const unsigned char *q, int *sc, int *mn) {
    if (s < 4) {
        *sc = q[s] & 63;
        *mn = q[s + 4] & 63;
    } else {
        *sc = (q[s + 4] & 0xf) | ((q[s - 4] >> 6) << 4);
        *mn = (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
    }
}
static void put_scale_min_k4(int s, int sc, int mn, unsigned char *q) {
    if (s < 4) {
        q[s] |= (unsigned char)sc;
        q[s + 4] |= (unsigned char)mn;
    } else {
        q[s + 4] |= (unsigned char)((sc & 0xf) | ((mn & 0xf) << 4));
        q[s - 4] |= (unsigned char)((sc >> 4) << 6);
        q[s] |= (unsigned char)((mn >> 4) << 6);
    }
}

/* 2-bit field of value i in a 64-byte array (Q2_K, Q3_K) */
static int two_bits(const unsigned char *qs, int i) { return (qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3; }
static void put_two_bits(unsigned char *qs, int i, int v) {
    qs[32 * (i / 128) + i % 32] |= (unsigned char)(v << (2 * ((i % 128) / 32)));
}
/* nibble of value i in a 128-byte array (Q4_K, Q5_K) */
static int nib45(const unsigned char *qs, int i) {
    unsigned char b = qs[32 * (i / 64) + i % 32];
    return (i % 64) < 32 ? b & 0xf : b >> 4;
}
static void put_nib45(unsigned char *qs, int i, int v) {
    qs[32 * (i / 64) + i % 32] |= (unsigned char)((i % 64) < 32 ? v : v << 4);
}
/* Q6_K: byte of ql and shift for value i; qh byte and shift */
static int q6_ql(int i) { return 64 * (i / 128) + ((i % 128) / 32 % 2) * 32 + i % 32; }
static int q6_shift(int i) { return (i % 128) / 64 * 4; }
static int q6_qh(int i) { return 32 * (i / 128) + i % 32; }

void kq_unpack_scales(uint32_t type, const unsigned char *b, kq_fields *f) {
    switch (type) {
    case GGML_Q2_K:
        for (int g = 0; g < 16; g++) f->sc[g] = b[g] & 0xf, f->mn[g] = b[g] >> 4;
        f->d = ld_half(b + 80);
        f->dmin = ld_half(b + 82);
        break;
    case GGML_Q3_K: {
        const unsigned char *s = b + 96;
        for (int g = 0; g < 16; g++) {
            int lo = g < 8 ? s[g] & 0xf : s[g - 8] >> 4, hi = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
            f->sc[g] = (int16_t)((lo | (hi << 4)) - 32);
            f->mn[g] = 0;
        }
        f->d = ld_half(b + 108);
        f->dmin = 0;
        break;
    }
    case GGML_Q4_K:
    case GGML_Q5_K:
        for (int s = 0; s < 8; s++) {
            int sc, mn;
            get_scale_min_k4(s, b + 4, &sc, &mn);
            f->sc[2 * s] = f->sc[2 * s + 1] = (int16_t)sc;
            f->mn[2 * s] = f->mn[2 * s + 1] = (int16_t)mn;
        }
        f->d = ld_half(b);
        f->dmin = ld_half(b + 2);
        break;
    case GGML_Q6_K:
        for (int g = 0; g < 16; g++) f->sc[g] = (int8_t)b[192 + g], f->mn[g] = 0;
        f->d = ld_half(b + 208);
        f->dmin = 0;
        break;
    default: break;
    }
}

void kq_unpack(uint32_t type, const unsigned char *b, kq_fields *f) {
    kq_unpack_scales(type, b, f);
    switch (type) {
    case GGML_Q2_K:
        for (int i = 0; i < QK_K; i++) f->u[i] = (uint8_t)two_bits(b + 16, i);
        break;
    case GGML_Q3_K:
        for (int i = 0; i < QK_K; i++) f->u[i] = (uint8_t)(two_bits(b + 32, i) | (((b[i % 32] >> (i / 32)) & 1) << 2));
        break;
    case GGML_Q4_K:
        for (int i = 0; i < QK_K; i++) f->u[i] = (uint8_t)nib45(b + 16, i);
        break;
    case GGML_Q5_K:
        for (int i = 0; i < QK_K; i++)
            f->u[i] = (uint8_t)(nib45(b + 48, i) | (((b[16 + i % 32] >> (2 * (i / 64) + (i % 64) / 32)) & 1) << 4));
        break;
    case GGML_Q6_K:
        for (int i = 0; i < QK_K; i++)
            f->u[i] = (uint8_t)(((b[q6_ql(i)] >> q6_shift(i)) & 0xf) | (((b[128 + q6_qh(i)] >> (2 * ((i % 128) / 32))) & 3) << 4));
        break;
    default: break;
    }
}

void kq_pack(uint32_t type, const kq_fields *f, unsigned char *b) {
    const wtype_info *t = wtype_get(type);
    memset(b, 0, (size_t)t->block_bytes);
    switch (type) {
    case GGML_Q2_K:
        for (int g = 0; g < 16; g++) b[g] = (unsigned char)(f->sc[g] | (f->mn[g] << 4));
        for (int i = 0; i < QK_K; i++) put_two_bits(b + 16, i, f->u[i] & 3);
        st_half(b + 80, f->d);
        st_half(b + 82, f->dmin);
        break;
    case GGML_Q3_K: {
        unsigned char *s = b + 96;
        for (int g = 0; g < 16; g++) {
            int v = f->sc[g] + 32;
            if (g < 8) s[g] |= (unsigned char)(v & 0xf);
            else s[g - 8] |= (unsigned char)((v & 0xf) << 4);
            s[8 + g % 4] |= (unsigned char)((v >> 4) << (2 * (g / 4)));
        }
        for (int i = 0; i < QK_K; i++) {
            put_two_bits(b + 32, i, f->u[i] & 3);
            b[i % 32] |= (unsigned char)((f->u[i] >> 2) << (i / 32));
        }
        st_half(b + 108, f->d);
        break;
    }
    case GGML_Q4_K:
    case GGML_Q5_K:
        st_half(b, f->d);
        st_half(b + 2, f->dmin);
        for (int s = 0; s < 8; s++) put_scale_min_k4(s, f->sc[2 * s], f->mn[2 * s], b + 4);
        if (type == GGML_Q4_K)
            for (int i = 0; i < QK_K; i++) put_nib45(b + 16, i, f->u[i]);
        else
            for (int i = 0; i < QK_K; i++) {
                put_nib45(b + 48, i, f->u[i] & 0xf);
                b[16 + i % 32] |= (unsigned char)((f->u[i] >> 4) << (2 * (i / 64) + (i % 64) / 32));
            }
        break;
    case GGML_Q6_K:
        for (int g = 0; g < 16; g++) b[192 + g] = (unsigned char)(int8_t)f->sc[g];
        for (int i = 0; i < QK_K; i++) {
            b[q6_ql(i)] |= (unsigned char)((f->u[i] & 0xf) << q6_shift(i));
            b[128 + q6_qh(i)] |= (unsigned char)((f->u[i] >> 4) << (2 * ((i % 128) / 32)));
        }
        st_half(b + 208, f->d);
        break;
    default: break;
    }
}

void kq_to_float(uint32_t type, const void *row, float *out, int64_t n) {
    const wtype_info *t = wtype_get(type);
    const int off = kq_offset(type);
    kq_fields f;
    for (int64_t blk = 0; blk < n / QK_K; blk++) {
        kq_unpack(type, (const unsigned char *)row + (size_t)blk * (size_t)t->block_bytes, &f);
        float *y = out + blk * QK_K;
        for (int g = 0; g < 16; g++) {
            const float dl = f.d * (float)f.sc[g], ml = f.dmin * (float)f.mn[g];
            for (int l = 0; l < 16; l++) y[16 * g + l] = dl * (float)(f.u[16 * g + l] - off) - ml;
        }
    }
}

/* ------------------------------------------------------------------ reference quantisers */
static int nearest(float v) { return (int)rintf(v); }
static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Asymmetric group of n values: levels 0..nmax with value s * q - m (m >= 0). Candidate steps around
 * (max - min) / nmax, each refitted by least squares (s, m) to its levels; the one with the smallest squared
 * error wins (as ggml's make_qkx2_quants searches). */
static void fit_asym(const float *x, int n, int nmax, float *s_out, float *m_out) {
    float mn = x[0], mx = x[0];
    for (int i = 1; i < n; i++) mn = fminf(mn, x[i]), mx = fmaxf(mx, x[i]);
    if (mn > 0) mn = 0;
    if (mx <= mn) {
        *s_out = 0, *m_out = -mn;
        return;
    }
    float best_s = (mx - mn) / (float)nmax, best_m = -mn, best_e = INFINITY;
    for (int k = -9; k <= 9; k++) {
        float is = ((float)nmax + 0.1f * (float)k) / (mx - mn);
        double sq = 0, sqq = 0, sx = 0, sqx = 0;
        for (int i = 0; i < n; i++) {
            int q = clampi(nearest(is * (x[i] - mn)), 0, nmax);
            sq += q, sqq += (double)q * q, sx += x[i], sqx += (double)q * x[i];
        }
        double det = n * sqq - sq * sq, s, b;
        if (det <= 0) continue;
        s = (n * sqx - sq * sx) / det;
        b = (sqq * sx - sq * sqx) / det; /* value = s q + b */
        if (b > 0) b = 0, s = sqq > 0 ? sqx / sqq : 0;
        if (s <= 0) continue;
        double e = 0;
        for (int i = 0; i < n; i++) {
            int q = clampi(nearest((float)((x[i] - b) / s)), 0, nmax);
            double r = s * q + b - x[i];
            e += r * r;
        }
        if (e < best_e) best_e = e, best_s = (float)s, best_m = (float)-b;
    }
    *s_out = best_s, *m_out = best_m;
}

/* Symmetric group: levels -nneg..nneg-1 with value s * q; candidates around the value of largest magnitude
 * mapping to -nneg, refitted by least squares. */
static float fit_sym(const float *x, int n, int nneg) {
    float amax = 0, mx = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), mx = x[i];
    if (amax == 0) return 0;
    float best_s = mx / (float)-nneg, best_e = INFINITY;
    for (int k = -9; k <= 9; k++) {
        float is = -((float)nneg + 0.1f * (float)k) / mx;
        double sqq = 0, sqx = 0;
        for (int i = 0; i < n; i++) {
            int q = clampi(nearest(is * x[i]), -nneg, nneg - 1);
            sqq += (double)q * q, sqx += (double)q * x[i];
        }
        if (sqq <= 0) continue;
        double s = sqx / sqq, e = 0;
        for (int i = 0; i < n; i++) {
            int q = clampi(nearest((float)(x[i] / s)), -nneg, nneg - 1);
            double r = s * q - x[i];
            e += r * r;
        }
        if (e < best_e) best_e = e, best_s = (float)s;
    }
    return best_s;
}

/* fp16 value of v (what the block stores) */
static float half_round(float v) { return fp16_to_f32(f32_to_fp16(v)); }

/* One super-block x[256] into fields: groups of gs values, levels 0..nmax (asymmetric, scales and mins 0..smax)
 * or -nneg..nneg-1 stored as q + nneg (symmetric, scales -smin..smin-1). */
static void quant_asym(const float *x, int gs, int nmax, int smax, kq_fields *f) {
    float s[16], m[16], maxs = 0, maxm = 0;
    const int ng = QK_K / gs;
    for (int g = 0; g < ng; g++) {
        fit_asym(x + gs * g, gs, nmax, &s[g], &m[g]);
        maxs = fmaxf(maxs, s[g]), maxm = fmaxf(maxm, m[g]);
    }
    f->d = half_round(maxs / (float)smax);
    f->dmin = half_round(maxm / (float)smax);
    for (int g = 0; g < ng; g++) {
        int ls = f->d > 0 ? clampi(nearest(s[g] / f->d), 0, smax) : 0;
        int lm = f->dmin > 0 ? clampi(nearest(m[g] / f->dmin), 0, smax) : 0;
        float sd = f->d * (float)ls, md = f->dmin * (float)lm;
        for (int l = 0; l < gs; l++) {
            int i = gs * g + l;
            f->u[i] = (uint8_t)(sd > 0 ? clampi(nearest((x[i] + md) / sd), 0, nmax) : 0);
        }
        for (int k = g * gs / 16; k < (g + 1) * gs / 16; k++) f->sc[k] = (int16_t)ls, f->mn[k] = (int16_t)lm;
    }
}

static void quant_sym(const float *x, int nneg, int smin, kq_fields *f) {
    float s[16], maxs = 0;
    for (int g = 0; g < 16; g++) {
        s[g] = fit_sym(x + 16 * g, 16, nneg);
        if (fabsf(s[g]) > fabsf(maxs)) maxs = s[g];
    }
    f->d = half_round(maxs / (float)-smin);
    f->dmin = 0;
    for (int g = 0; g < 16; g++) {
        int ls = f->d != 0 ? clampi(nearest(s[g] / f->d), -smin, smin - 1) : 0;
        float sd = f->d * (float)ls;
        for (int l = 0; l < 16; l++) {
            int i = 16 * g + l;
            f->u[i] = (uint8_t)((sd != 0 ? clampi(nearest(x[i] / sd), -nneg, nneg - 1) : 0) + nneg);
        }
        f->sc[g] = (int16_t)ls, f->mn[g] = 0;
    }
}

void kq_from_float(uint32_t type, const float *x, void *out, int64_t n) {
    const wtype_info *t = wtype_get(type);
    kq_fields f;
    for (int64_t blk = 0; blk < n / QK_K; blk++) {
        const float *v = x + blk * QK_K;
        switch (type) {
        case GGML_Q2_K: quant_asym(v, 16, 3, 15, &f); break;
        case GGML_Q3_K: quant_sym(v, 4, 32, &f); break;
        case GGML_Q4_K: quant_asym(v, 32, 15, 63, &f); break;
        case GGML_Q5_K: quant_asym(v, 32, 31, 63, &f); break;
        case GGML_Q6_K: quant_sym(v, 32, 128, &f); break;
        default: return;
        }
        kq_pack(type, &f, (unsigned char *)out + (size_t)blk * (size_t)t->block_bytes);
    }
}

/* ------------------------------------------------------------------ Q8_K activations and the integer dot */
void kern_quantize_q8k(const float *x, int n_cols, act_q8k *out) {
    for (int b = 0; b < n_cols / QK_K; b++) {
        const float *v = x + QK_K * b;
        act_q8k *o = &out[b];
        float amax = 0, mx = 0;
        for (int j = 0; j < QK_K; j++)
            if (fabsf(v[j]) > amax) amax = fabsf(v[j]), mx = v[j];
        if (amax == 0) {
            memset(o, 0, sizeof *o);
            continue;
        }
        const float iscale = -127.0f / mx;
        for (int j = 0; j < QK_K; j++) {
            int q = nearest(iscale * v[j]);
            o->qs[j] = (int8_t)(q > 127 ? 127 : q);
        }
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += o->qs[16 * g + l];
            o->bsums[g] = (int16_t)s;
        }
        o->d = 1.0f / iscale;
    }
}

void kq_dot_ints(const kq_fields *f, int off, const act_q8k *x, int32_t *isum, int32_t *msum) {
    int32_t is = 0, ms = 0;
    for (int g = 0; g < 16; g++) {
        int32_t s = 0;
        for (int l = 0; l < 16; l++) s += (f->u[16 * g + l] - off) * x->qs[16 * g + l];
        is += f->sc[g] * s;
        ms += f->mn[g] * x->bsums[g];
    }
    *isum = is, *msum = ms;
}

void kq_lanes_ggml(uint32_t type, const kq_fields *f, int off, const act_q8k *x, int32_t lane[8]) {
    const int elem_off = type == GGML_Q3_K ? off : 0; /* Q3_K: the offset per value; Q6_K: through bsums */
    for (int L = 0; L < 8; L++) {
        int32_t s = 0;
        for (int c = 0; c < 8; c++) {
            int32_t p = 0;
            for (int k = 0; k < 4; k++) p += (f->u[32 * c + 4 * L + k] - elem_off) * x->qs[32 * c + 4 * L + k];
            s += f->sc[2 * c + L / 4] * p;
        }
        if (type != GGML_Q3_K) s -= off * (f->sc[2 * L] * x->bsums[2 * L] + f->sc[2 * L + 1] * x->bsums[2 * L + 1]);
        lane[L] = s;
    }
}
