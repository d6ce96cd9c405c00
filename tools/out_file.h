/* out_file: the CLI's output files and their text. Paths are checked before the long run starts (one that cannot be
 * written is an error then, not a silent skip after it), every write is checked when the file is closed, standard
 * output too (one check for every command, in main); and the one escape each for JSON strings and XML text. */
#ifndef SD_TOOLS_OUT_FILE_H
#define SD_TOOLS_OUT_FILE_H
#include <stdbool.h>
#include <stdio.h>

/* Whether path can be written (opened for appending, so nothing is truncated; a file this call had to create is
 * removed again). Prints "error: cannot write PATH (what): reason" and returns false when not. NULL path: true. */
bool out_check(const char *path, const char *what);
/* Opens path for writing; NULL after the same message. */
FILE *out_open(const char *path, const char *what);
/* Flushes and closes f (NULL: true); false after "error: writing PATH failed: reason" when any write to it failed. */
bool out_close(FILE *f, const char *path);
/* Flushes standard output; false after a message when any write to it failed (a full disk, /dev/full). */
bool out_stdout_ok(void);

/* s as a JSON string with its quotes: '"', '\\' and control characters escaped (UTF-8 passes through). */
void out_json_str(FILE *f, const char *s);
/* s as XML text or attribute value: & < > " ' escaped, other control characters than tab/newline dropped. */
void out_xml_text(FILE *f, const char *s);
#endif
