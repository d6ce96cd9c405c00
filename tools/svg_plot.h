/* svg_plot: the CLI's one chart writer — a grouped bar chart as SVG (bench spec: speedup per category and method;
 * bench batch: goodput per batch size and method). Text is escaped (out_xml_text); the file is written through
 * out_file (a failed write is an error). */
#ifndef SD_TOOLS_SVG_PLOT_H
#define SD_TOOLS_SVG_PLOT_H
#include <stdbool.h>

/* Groups along x (labels group[0..n_group)), one bar per series in each group (colour and legend entry series[s]),
 * heights val[g * n_series + s] (>= 0); y from 0 to the largest value (at least 1.5 ref) rounded up to a tick; a
 * dashed line at ref (ref <= 0: none); each bar's tooltip gives its value followed by unit ("x", " tok/s"). false
 * after a message when the file cannot be written. */
bool svg_bars(const char *path, const char *what, const char *title, const char *const *group, int n_group,
              const char *const *series, int n_series, const double *val, double ref, const char *unit);
#endif
