/* version: the library's version string (SPECDEC_VERSION of the header it was built with). */
#include "specdec.h"

const char *sd_version(void) { return SPECDEC_VERSION; }
