// System library shim over Intel ISA-L (Debian: libisal-dev): hardware CRC32C.
#include <isa-l/crc.h>
