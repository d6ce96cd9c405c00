#define _POSIX_C_SOURCE 200809L
#include "serve_resp.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *print_free(cJSON *o) {
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

static cJSON *error_obj(const sv_error *e) {
    cJSON *o = cJSON_CreateObject(), *x = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(x, "message", e->msg);
    cJSON_AddStringToObject(x, "type", e->type ? e->type : "server_error");
    if (e->param[0]) cJSON_AddStringToObject(x, "param", e->param);
    else cJSON_AddNullToObject(x, "param");
    if (e->code) cJSON_AddStringToObject(x, "code", e->code);
    else cJSON_AddNullToObject(x, "code");
    return o;
}

char *sv_json_error(const sv_error *e) { return print_free(error_obj(e)); }

static void add_usage(cJSON *o, const sv_usage *u) {
    cJSON *x = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(x, "prompt_tokens", u->prompt_tokens);
    cJSON_AddNumberToObject(x, "completion_tokens", u->completion_tokens);
    cJSON_AddNumberToObject(x, "total_tokens", u->prompt_tokens + u->completion_tokens);
    cJSON_AddNumberToObject(x, "draft_tokens", u->draft_tokens);
    cJSON_AddNumberToObject(x, "accepted_tokens", u->accepted_tokens);
    cJSON_AddStringToObject(x, "method", u->method);
}

static cJSON *head(sv_kind kind, bool chunk, const char *id, long created, const char *model) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", kind == SV_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                                         : "text_completion");
    cJSON_AddNumberToObject(o, "created", (double)created);
    cJSON_AddStringToObject(o, "model", model);
    return o;
}

static void add_finish(cJSON *c, const char *finish) {
    if (finish) cJSON_AddStringToObject(c, "finish_reason", finish);
    else cJSON_AddNullToObject(c, "finish_reason");
}

char *sv_json_response(sv_kind kind, const char *id, long created, const char *model, const char *text,
                       const char *finish, const sv_usage *u) {
    cJSON *o = head(kind, false, id, created, model);
    cJSON *cs = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddItemToArray(cs, c);
    cJSON_AddNumberToObject(c, "index", 0);
    if (kind == SV_CHAT) {
        cJSON *m = cJSON_AddObjectToObject(c, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        cJSON_AddStringToObject(m, "content", text);
    } else {
        cJSON_AddStringToObject(c, "text", text);
    }
    cJSON_AddNullToObject(c, "logprobs");
    add_finish(c, finish);
    add_usage(o, u);
    return print_free(o);
}

static char *sse(char *json) {
    if (!json) return NULL;
    size_t n = strlen(json);
    char *s = malloc(n + 9);
    if (s) {
        memcpy(s, "data: ", 6);
        memcpy(s + 6, json, n);
        memcpy(s + 6 + n, "\n\n", 3);
    }
    free(json);
    return s;
}

char *sv_sse_chunk(sv_kind kind, const char *id, long created, const char *model, bool role, const char *text,
                   const char *finish, const sv_usage *u) {
    cJSON *o = head(kind, true, id, created, model);
    cJSON *cs = cJSON_AddArrayToObject(o, "choices");
    if (u) {
        add_usage(o, u);
        return sse(print_free(o));
    }
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToArray(cs, c);
    cJSON_AddNumberToObject(c, "index", 0);
    if (kind == SV_CHAT) {
        cJSON *d = cJSON_AddObjectToObject(c, "delta");
        if (role) cJSON_AddStringToObject(d, "role", "assistant");
        if (text) cJSON_AddStringToObject(d, "content", text);
    } else {
        cJSON_AddStringToObject(c, "text", text ? text : "");
    }
    cJSON_AddNullToObject(c, "logprobs");
    add_finish(c, finish);
    return sse(print_free(o));
}

char *sv_sse_error(const sv_error *e) { return sse(print_free(error_obj(e))); }

char *sv_json_models(const char *model, long created) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *d = cJSON_AddArrayToObject(o, "data"), *m = cJSON_CreateObject();
    cJSON_AddItemToArray(d, m);
    cJSON_AddStringToObject(m, "id", model);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)created);
    cJSON_AddStringToObject(m, "owned_by", "specdec");
    return print_free(o);
}
