/* jsonl: reads prompt sets in Spec-Bench's JSONL format, one object per line:
 *   {"question_id": 81, "category": "writing", "turns": ["...", "..."]}
 * A small strict JSON reader (RFC 8259 for everything it accepts): one object per line and nothing after it, commas
 * only between elements, numbers and true/false/null exactly as the grammar says, strings in valid UTF-8 with no raw
 * control characters and the listed escapes only (\uXXXX and surrogate pairs to UTF-8; \u0000 and lone surrogates
 * refused: the texts are C strings); nested values checked and skipped. "question_id" is a string or a number,
 * "category" a string (each under 64 bytes), "turns" a non-empty array of strings. */
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
/* The same from text in memory (NUL-terminated; its newlines are overwritten); name labels the messages. */
int jl_parse(char *text, const char *name, jl_question **out, char *err, int err_cap);
void jl_free(jl_question *q, int n);
#endif
