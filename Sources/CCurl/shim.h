// libcurl for Swift: curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot
// call, so each use gets a typed inline wrapper.
#ifndef STRATA_CCURL_SHIM_H
#define STRATA_CCURL_SHIM_H
#include <curl/curl.h>

static inline CURLcode strata_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode strata_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode strata_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode strata_curl_setopt_offset(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}
typedef size_t (*strata_curl_data_callback)(char *data, size_t size, size_t count, void *context);
static inline CURLcode strata_curl_setopt_callback(CURL *handle, CURLoption option, strata_curl_data_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}
static inline CURLcode strata_curl_response_code(CURL *handle, long *code) {
    return curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, code);
}
#endif
