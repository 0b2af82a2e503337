// System library shim over liblz4 (Debian: liblz4-dev).
#include <lz4.h>
