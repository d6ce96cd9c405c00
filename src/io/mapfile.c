#define _DEFAULT_SOURCE
#include "io/mapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/err.h"

/* Reads size bytes of fd into anonymous memory (released with munmap like a mapping). */
static sd_status read_all(int fd, const char *path, size_t size, void **out, sd_error *err) {
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return err_set(err, SD_ERR_NOMEM, "%s: cannot allocate %.1f MiB to read the file into (--no-mmap): %s", path,
                       (double)size / (1 << 20), strerror(errno));
    size_t done = 0;
    while (done < size) {
        ssize_t n = read(fd, (unsigned char *)p + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int e = n < 0 ? errno : 0;
            munmap(p, size);
            return e ? err_set(err, SD_ERR_IO, "%s: read failed: %s", path, strerror(e))
                     : err_set(err, SD_ERR_IO, "%s: file shrank while being read", path);
        }
        done += (size_t)n;
    }
    mprotect(p, size, PROT_READ);
    *out = p;
    return SD_OK;
}

sd_status mapfile_open(mapfile *m, const char *path, const mapfile_mode *mode, sd_error *err) {
    memset(m, 0, sizeof *m);
    mapfile_mode md = mode ? *mode : (mapfile_mode){0};
    int fd = open(path, O_RDONLY);
    if (fd < 0) return err_set(err, SD_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(err, SD_ERR_IO, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return err_set(err, SD_ERR_FORMAT, "%s: file is empty", path);
    }
    size_t size = (size_t)st.st_size;
    void *p = NULL;
    if (md.read_all) {
        sd_status s = read_all(fd, path, size, &p, err);
        close(fd);
        if (s) return s;
    } else {
        p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        int e = errno;
        close(fd);
        if (p == MAP_FAILED) return err_set(err, SD_ERR_IO, "%s: mmap failed: %s", path, strerror(e));
    }
    if (md.lock && mlock(p, size) != 0) {
        int e = errno;
        struct rlimit rl;
        char lim[48] = "unknown";
        if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
            if (rl.rlim_cur == RLIM_INFINITY) snprintf(lim, sizeof lim, "unlimited");
            else snprintf(lim, sizeof lim, "%.1f MiB", (double)rl.rlim_cur / (1 << 20));
        }
        munmap(p, size);
        return err_set(err, SD_ERR_IO,
                       "%s: --mlock: cannot lock %.1f MiB in RAM: %s (RLIMIT_MEMLOCK is %s; raise it with `ulimit -l`)",
                       path, (double)size / (1 << 20), strerror(e), lim);
    }
    m->data = p;
    m->size = size;
    m->map_size = size;
    return SD_OK;
}

void mapfile_close(mapfile *m) {
    if (m->data && m->map_size) munmap((void *)m->data, m->map_size); /* also unlocks */
    memset(m, 0, sizeof *m);
}
