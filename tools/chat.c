#include "chat.h"

#include <stdlib.h>
#include <string.h>

tpl_kind chat_detect(const sd_model *model) {
    char buf[256] = "";
    if (sd_model_meta_str(model, "tokenizer.chat_template", buf, sizeof buf) > 0) {
        if (strstr(buf, "<|im_start|>")) return TPL_CHATML;
        if (strstr(buf, "[INST]")) return TPL_LLAMA2;
    }
    return TPL_PLAIN;
}

const char *chat_name(tpl_kind k) { return k == TPL_CHATML ? "chatml" : k == TPL_LLAMA2 ? "llama-2 chat" : "plain-text"; }

static char *append(char *s, size_t *len, const char *add) {
    if (!s) return NULL;
    size_t a = strlen(add);
    char *n = realloc(s, *len + a + 1);
    if (!n) {
        free(s);
        return NULL;
    }
    memcpy(n + *len, add, a + 1);
    *len += a;
    return n;
}

char *chat_turn_text(tpl_kind k, const char *user, bool first) {
    size_t len = 0;
    char *s = calloc(1, 1);
    if (k == TPL_CHATML) {
        s = append(s, &len, first ? "" : "<|im_end|>\n");
        s = append(s, &len, "<|im_start|>user\n");
        s = append(s, &len, user);
        s = append(s, &len, "<|im_end|>\n<|im_start|>assistant\n");
    } else if (k == TPL_LLAMA2) {
        s = append(s, &len, first ? "[INST] " : " [INST] ");
        s = append(s, &len, user);
        s = append(s, &len, " [/INST]");
    } else {
        s = append(s, &len, first ? "" : "\n\n");
        s = append(s, &len, user);
    }
    return s;
}
