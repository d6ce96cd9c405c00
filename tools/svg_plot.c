#include "svg_plot.h"

#include <math.h>
#include <stdio.h>

#include "out_file.h"

/* A tick step of 1, 2 or 5 x 10^k giving about six ticks up to ymax. */
static double tick_step(double ymax) {
    double raw = ymax / 6, p = pow(10, floor(log10(raw))), m = raw / p;
    return p * (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10);
}

bool svg_bars(const char *path, const char *what, const char *title, const char *const *group, int n_group,
              const char *const *series, int n_series, const double *val, double ref, const char *unit) {
    FILE *f = out_open(path, what);
    if (!f) return false;
    const char *colors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7"};
    const double W = 120 + n_group * (n_series * 22 + 30), H = 360, top = 40, bottom = 300, left = 70;
    double ymax = ref > 0 ? 1.5 * ref : 0;
    for (int i = 0; i < n_group * n_series; i++)
        if (val[i] > ymax) ymax = val[i];
    if (!(ymax > 0)) ymax = 1;
    const double step = tick_step(ymax);
    ymax = step * ceil(ymax / step - 1e-9);
    fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' font-family='sans-serif' "
               "font-size='11'>\n<rect width='100%%' height='100%%' fill='white'/>\n<text x='%.0f' y='20' font-size='14'>",
            W + 160, H, left);
    out_xml_text(f, title);
    fputs("</text>\n", f);
    for (int t = 0; t * step <= ymax + 1e-9 * ymax; t++) {
        double y = t * step, py = bottom - (bottom - top) * y / ymax;
        fprintf(f, "<line x1='%.0f' x2='%.0f' y1='%.1f' y2='%.1f' stroke='#ddd'/><text x='%.0f' y='%.1f' "
                   "text-anchor='end'>%g</text>\n", left, W, py, py, left - 6, py + 4, y);
    }
    if (ref > 0) {
        double pr = bottom - (bottom - top) * ref / ymax;
        fprintf(f, "<line x1='%.0f' x2='%.0f' y1='%.1f' y2='%.1f' stroke='black' stroke-dasharray='4 3'/>\n", left, W, pr,
                pr);
    }
    for (int g = 0; g < n_group; g++) {
        double gx = left + 15 + g * (n_series * 22 + 30);
        for (int s = 0; s < n_series; s++) {
            double v = val[g * n_series + s], h = (bottom - top) * (v > 0 ? v : 0) / ymax, x = gx + s * 22;
            fprintf(f, "<rect x='%.1f' y='%.1f' width='18' height='%.1f' fill='%s'><title>", x, bottom - h, h,
                    colors[s % 8]);
            out_xml_text(f, group[g]);
            fputc(' ', f);
            out_xml_text(f, series[s]);
            fprintf(f, ": %.2f", v);
            out_xml_text(f, unit);
            fputs("</title></rect>\n", f);
        }
        fprintf(f, "<text x='%.1f' y='%.0f' text-anchor='middle'>", gx + n_series * 11, bottom + 16);
        out_xml_text(f, group[g]);
        fputs("</text>\n", f);
    }
    for (int s = 0; s < n_series; s++) {
        fprintf(f, "<rect x='%.0f' y='%.0f' width='12' height='12' fill='%s'/><text x='%.0f' y='%.0f'>", W + 10,
                top + s * 18, colors[s % 8], W + 28, top + s * 18 + 10);
        out_xml_text(f, series[s]);
        fputs("</text>\n", f);
    }
    fputs("</svg>\n", f);
    return out_close(f, path);
}
