#include "kernels/att_f16.h"

#include <math.h>

#include "util/fp16.h"

static inline float r16(float x) { return fp16_to_f32(f32_to_fp16(x)); }

void att_f16_begin(att_f16_state *st, const float *q, int hd) {
    st->M = -INFINITY;
    st->S = 0.0f;
    for (int e = 0; e < hd; e++) st->q[e] = r16(q[e]), st->acc[e] = 0.0f;
}

void att_f16_run(att_f16_state *st, const uint16_t *k, const uint16_t *v, size_t stride, const int *cells, int n,
                 int hd, float scale) {
    float M = st->M, S = st->S, *acc = st->acc;
    for (int j = 0; j < n; j++) {
        const size_t off = (size_t)(cells ? cells[j] : j) * stride;
        const uint16_t *kr = k + off, *vr = v + off;
        double sum = 0.0;
        for (int e = 0; e < hd; e++) {
            const float p = st->q[e] * fp16_to_f32(kr[e]); /* exact: two fp16 numbers */
            sum += (double)p;
        }
        const float s = (float)sum * scale;
        float ms = 1.0f, vs = 1.0f;
        if (s > M) {
            const float m_old = M;
            M = s;
            ms = expf(m_old - M);
            for (int e = 0; e < hd; e++) acc[e] = r16(acc[e] * ms);
        } else {
            vs = expf(s - M);
        }
        for (int e = 0; e < hd; e++) acc[e] = r16(fmaf(fp16_to_f32(vr[e]), vs, acc[e]));
        S = fmaf(S, ms, vs);
    }
    st->M = M;
    st->S = S;
}

void att_f16_end(const att_f16_state *st, int hd, float *o) {
    const float inv = st->S == 0.0f ? 0.0f : 1.0f / st->S;
    for (int e = 0; e < hd; e++) o[e] = st->acc[e] * inv;
}
