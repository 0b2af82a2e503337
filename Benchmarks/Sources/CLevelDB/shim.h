// LevelDB's C API (Debian's libleveldb-dev).
#include <leveldb/c.h>
