/* textfile: reading a whole text file safely (the public sd_read_text_file): a size bound that holds for pipes and
 * devices too, folders refused, NUL bytes refused (text is never cut short silently). */
#ifndef SD_UTIL_TEXTFILE_H
#define SD_UTIL_TEXTFILE_H
#include "specdec.h"
#endif
