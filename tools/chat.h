/* chat: a user turn in the model's chat format (ChatML or Llama-2 [INST] when its chat template says so, plain
 * text otherwise), for the commands that run prompt sets (bench spec, batch). */
#ifndef SD_TOOLS_CHAT_H
#define SD_TOOLS_CHAT_H
#include <stdbool.h>

#include "specdec.h"

typedef enum { TPL_PLAIN, TPL_CHATML, TPL_LLAMA2 } tpl_kind;

tpl_kind chat_detect(const sd_model *model);
const char *chat_name(tpl_kind k);
/* The text of a user turn (first: the conversation's first turn); malloc'd, NULL when out of memory. */
char *chat_turn_text(tpl_kind k, const char *user, bool first);
#endif
