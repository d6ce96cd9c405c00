/* jsonl: reads prompt sets in Spec-Bench's JSONL format, one object per line:
 *   {"question_id": 81, "category": "writing", "turns": ["...", "..."]}
 * A small strict JSON reader: strings with all escapes (\uXXXX and surrogate pairs to UTF-8), numbers, nested
 * values skipped. */
#ifndef SD_TOOLS_JSONL_H
#define SD_TOOLS_JSONL_H

typedef struct jl_question {
    char id[64];
    char category[64];
    char **turns; /* [n_turns] */
    int n_turns;
} jl_question;

/* Loads every line; returns the count (>= 0) or -1 with a message in err (line number included). */
int jl_load(const char *path, jl_question **out, char *err, int err_cap);
void jl_free(jl_question *q, int n);
#endif
