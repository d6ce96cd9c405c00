/* mapfile: a whole file, read-only: mapped (the page cache's pages, shared), or read into memory the process owns
 * (--no-mmap), optionally locked in RAM (--mlock), as llama.cpp offers. */
#ifndef SD_IO_MAPFILE_H
#define SD_IO_MAPFILE_H
#include <stdbool.h>
#include <stddef.h>
#include "specdec.h"

typedef struct mapfile_mode {
    bool read_all; /* read the file into anonymous memory instead of mapping it */
    bool lock;     /* mlock the bytes (fails with a message naming RLIMIT_MEMLOCK when the limit is too low) */
} mapfile_mode;

typedef struct mapfile {
    const unsigned char *data; /* [size] bytes, read-only */
    size_t size;
    size_t map_size; /* bytes to munmap (the mapping, or the anonymous buffer); 0 when nothing is held */
} mapfile;

/* mode NULL: mapped, not locked. */
sd_status mapfile_open(mapfile *m, const char *path, const mapfile_mode *mode, sd_error *err);
void mapfile_close(mapfile *m);
#endif
