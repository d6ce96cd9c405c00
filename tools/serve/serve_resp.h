/* serve_resp: the bodies the server writes, in OpenAI's shapes: errors, completions and chat completions (whole
 * and as Server-Sent Events chunks), the model list. Every function returns a malloc'd NUL-terminated string
 * (NULL when out of memory). */
#ifndef SD_SERVE_RESP_H
#define SD_SERVE_RESP_H
#include <stdint.h>

#include "serve_req.h"

typedef struct sv_usage {
    int prompt_tokens, completion_tokens, draft_tokens, accepted_tokens;
    const char *method;
} sv_usage;

/* {"error": {"message", "type", "param", "code"}} */
char *sv_json_error(const sv_error *e);
/* A whole response: text_completion or chat.completion. */
char *sv_json_response(sv_kind kind, const char *id, long created, const char *model, const char *text,
                       const char *finish, const sv_usage *u);
/* One SSE event "data: {...}\n\n" of a stream. role: the first chat chunk (delta.role); text may be NULL (no
 * content); finish NULL while streaming; u non-NULL: the usage chunk (empty choices). */
char *sv_sse_chunk(sv_kind kind, const char *id, long created, const char *model, bool role, const char *text,
                   const char *finish, const sv_usage *u);
/* "data: {error...}\n\n" */
char *sv_sse_error(const sv_error *e);
/* GET /v1/models */
char *sv_json_models(const char *model, long created);
#endif
