/* strmap: byte-string -> int hash table (open addressing; keys are copied). */
#ifndef SD_UTIL_STRMAP_H
#define SD_UTIL_STRMAP_H
#include <stdbool.h>
#include <stddef.h>

typedef struct str_map str_map;

str_map *strmap_new(size_t expected);
void strmap_free(str_map *m);
/* Inserts or keeps the first value for a key; false when out of memory. */
bool strmap_put(str_map *m, const char *key, size_t len, int value);
/* -1 when absent. */
int strmap_get(const str_map *m, const char *key, size_t len);
#endif
