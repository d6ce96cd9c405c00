/* chat_tpl: the chat formats of the common model families, recognised from a GGUF's tokenizer.chat_template (or
 * named with --chat-template), and a conversation rendered in one of them for the model to continue. */
#ifndef SD_SERVE_CHAT_TPL_H
#define SD_SERVE_CHAT_TPL_H
#include <stdbool.h>

#include "specdec.h"

typedef enum {
    CT_NONE = 0, /* no template: chat requests are refused */
    CT_CHATML,
    CT_LLAMA2,
    CT_LLAMA3,
    CT_MISTRAL,
    CT_GEMMA,
    CT_PHI3,
    CT_ZEPHYR,
} chat_tpl;

typedef struct chat_msg {
    const char *role; /* "system", "user" or "assistant" */
    const char *content;
} chat_msg;

/* The family a Jinja template text belongs to (by the markers it prints); CT_NONE when none is recognised. */
chat_tpl chat_tpl_detect(const char *jinja);
/* By name: "chatml", "llama2", "llama3", "mistral", "gemma", "phi3", "zephyr"; CT_NONE for others. */
chat_tpl chat_tpl_from_name(const char *name);
const char *chat_tpl_name(chat_tpl t); /* "none" for CT_NONE */
/* The names, for help texts and messages: "chatml, llama2, ...". */
const char *chat_tpl_names(void);
/* The model's own template (GGUF tokenizer.chat_template): *out gets its family; returns false with a message in
 * err (naming --chat-template) when the model has a template that is none of the families. No template: CT_NONE. */
bool chat_tpl_from_model(const sd_model *model, chat_tpl *out, char *err, int cap);
/* The conversation as text, ending with the assistant's turn opened (BOS is not included: the tokenizer adds it).
 * malloc'd; NULL when out of memory. */
char *chat_tpl_render(chat_tpl t, const chat_msg *msgs, int n);
#endif
