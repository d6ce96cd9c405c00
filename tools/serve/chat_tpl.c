#include "chat_tpl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[] = {"none", "chatml", "llama2", "llama3", "mistral", "gemma", "phi3", "zephyr"};

chat_tpl chat_tpl_detect(const char *j) {
    if (!j || !*j) return CT_NONE;
    if (strstr(j, "<|im_start|>")) return CT_CHATML;
    if (strstr(j, "<|start_header_id|>")) return CT_LLAMA3;
    if (strstr(j, "<start_of_turn>")) return CT_GEMMA;
    if (strstr(j, "<|user|>") && strstr(j, "<|end|>")) return CT_PHI3;
    if (strstr(j, "<|user|>")) return CT_ZEPHYR;
    if (strstr(j, "[INST]") && strstr(j, "<<SYS>>")) return CT_LLAMA2;
    if (strstr(j, "[INST]")) return CT_MISTRAL;
    return CT_NONE;
}

chat_tpl chat_tpl_from_name(const char *name) {
    for (int i = 1; i < (int)(sizeof names / sizeof names[0]); i++)
        if (!strcmp(name, names[i])) return (chat_tpl)i;
    if (!strcmp(name, "llama-2")) return CT_LLAMA2;
    if (!strcmp(name, "llama-3")) return CT_LLAMA3;
    if (!strcmp(name, "phi-3")) return CT_PHI3;
    return CT_NONE;
}

const char *chat_tpl_name(chat_tpl t) {
    return (int)t >= 0 && (int)t < (int)(sizeof names / sizeof names[0]) ? names[t] : "none";
}

const char *chat_tpl_names(void) { return "chatml, llama2, llama3, mistral, gemma, phi3, zephyr"; }

bool chat_tpl_from_model(const sd_model *model, chat_tpl *out, char *err, int cap) {
    *out = CT_NONE;
    int n = sd_model_meta_str(model, "tokenizer.chat_template", NULL, 0);
    if (n < 0) return true;
    char *buf = malloc((size_t)n + 1);
    if (!buf) {
        snprintf(err, (size_t)cap, "out of memory reading the chat template");
        return false;
    }
    sd_model_meta_str(model, "tokenizer.chat_template", buf, n + 1);
    *out = chat_tpl_detect(buf);
    free(buf);
    if (*out == CT_NONE) {
        snprintf(err, (size_t)cap,
                 "the model's chat template (tokenizer.chat_template) is none of the known families (%s); name one with "
                 "--chat-template NAME",
                 chat_tpl_names());
        return false;
    }
    return true;
}

/* A growing string. */
typedef struct sbuf {
    char *s;
    size_t n, cap;
    bool oom;
} sbuf;

static void put(sbuf *b, const char *t) {
    size_t a = strlen(t);
    if (b->oom) return;
    if (b->n + a + 1 > b->cap) {
        size_t c = (b->cap ? b->cap * 2 : 256);
        while (c < b->n + a + 1) c *= 2;
        char *s = realloc(b->s, c);
        if (!s) {
            b->oom = true;
            return;
        }
        b->s = s, b->cap = c;
    }
    memcpy(b->s + b->n, t, a + 1);
    b->n += a;
}

static bool is(const chat_msg *m, const char *role) { return !strcmp(m->role, role); }

/* Families without a system role: the system text goes before the first user message, separated by a blank line. */
static void put_user_with_system(sbuf *b, const char *sys, const chat_msg *m) {
    if (sys) {
        put(b, sys);
        put(b, "\n\n");
    }
    put(b, m->content);
}

char *chat_tpl_render(chat_tpl t, const chat_msg *msgs, int n) {
    sbuf b = {0};
    put(&b, "");
    const char *sys = NULL; /* a pending system text (families that fold it into the first user turn) */
    bool first_user = true;
    for (int i = 0; i < n; i++) {
        const chat_msg *m = &msgs[i];
        switch (t) {
        case CT_CHATML:
            put(&b, "<|im_start|>"), put(&b, m->role), put(&b, "\n"), put(&b, m->content), put(&b, "<|im_end|>\n");
            break;
        case CT_LLAMA3:
            put(&b, "<|start_header_id|>"), put(&b, m->role), put(&b, "<|end_header_id|>\n\n"), put(&b, m->content);
            put(&b, "<|eot_id|>");
            break;
        case CT_PHI3:
            put(&b, "<|"), put(&b, m->role), put(&b, "|>\n"), put(&b, m->content), put(&b, "<|end|>\n");
            break;
        case CT_ZEPHYR:
            put(&b, "<|"), put(&b, m->role), put(&b, "|>\n"), put(&b, m->content), put(&b, "</s>\n");
            break;
        case CT_GEMMA:
            if (is(m, "system")) {
                sys = m->content;
                break;
            }
            put(&b, is(m, "user") ? "<start_of_turn>user\n" : "<start_of_turn>model\n");
            if (is(m, "user")) put_user_with_system(&b, sys, m);
            else put(&b, m->content);
            if (is(m, "user")) sys = NULL;
            put(&b, "<end_of_turn>\n");
            break;
        case CT_LLAMA2:
            if (is(m, "system")) {
                sys = m->content;
                break;
            }
            if (is(m, "user")) {
                put(&b, first_user ? "[INST] " : "<s>[INST] ");
                if (sys) put(&b, "<<SYS>>\n"), put(&b, sys), put(&b, "\n<</SYS>>\n\n");
                sys = NULL;
                put(&b, m->content), put(&b, " [/INST]");
                first_user = false;
            } else {
                put(&b, " "), put(&b, m->content), put(&b, " </s>");
            }
            break;
        case CT_MISTRAL:
            if (is(m, "system")) {
                sys = m->content;
                break;
            }
            if (is(m, "user")) {
                put(&b, "[INST] ");
                put_user_with_system(&b, sys, m);
                sys = NULL;
                put(&b, " [/INST]");
            } else {
                put(&b, m->content), put(&b, "</s>");
            }
            break;
        case CT_NONE:
            put(&b, m->content), put(&b, "\n");
            break;
        }
    }
    switch (t) { /* open the assistant's turn */
    case CT_CHATML: put(&b, "<|im_start|>assistant\n"); break;
    case CT_LLAMA3: put(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n"); break;
    case CT_PHI3:
    case CT_ZEPHYR: put(&b, "<|assistant|>\n"); break;
    case CT_GEMMA: put(&b, "<start_of_turn>model\n"); break;
    default: break;
    }
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}
