/* mapfile: a whole file mapped read-only. */
#ifndef SD_IO_MAPFILE_H
#define SD_IO_MAPFILE_H
#include <stddef.h>
#include "specdec.h"

typedef struct mapfile {
    const unsigned char *data; /* [size] bytes, read-only */
    size_t size;
} mapfile;

sd_status mapfile_open(mapfile *m, const char *path, sd_error *err);
void mapfile_close(mapfile *m);
#endif
