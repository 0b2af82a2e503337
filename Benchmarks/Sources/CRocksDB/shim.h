// RocksDB's C API (Debian's librocksdb-dev).
#include <rocksdb/c.h>
