#ifndef PUSHREPORTER_CCURL_SHIM_H
#define PUSHREPORTER_CCURL_SHIM_H
// libcurl's setopt/getinfo functions are variadic, which Swift cannot call; these typed
// wrappers are the only way the transport reaches them. Bit-mask macros are re-exported as
// constants because Swift does not import casted macros.
#include <curl/curl.h>

typedef size_t (*pr_curl_data_callback)(char *data, size_t size, size_t count, void *context);

static inline CURLcode pr_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode pr_easy_setopt_pointer(CURL *handle, CURLoption option, const void *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode pr_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode pr_easy_setopt_offset(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode pr_easy_setopt_callback(CURL *handle, CURLoption option, pr_curl_data_callback value) {
    return curl_easy_setopt(handle, option, value);
}
// The blob is not copied: `data` must outlive every use of the handle.
static inline CURLcode pr_easy_setopt_blob(CURL *handle, CURLoption option, void *data, size_t length) {
    struct curl_blob blob = { data, length, CURL_BLOB_NOCOPY };
    return curl_easy_setopt(handle, option, &blob);
}
static inline CURLcode pr_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}
static inline CURLcode pr_easy_getinfo_offset(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}
static inline CURLcode pr_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}
static inline CURLcode pr_easy_getinfo_string(CURL *handle, CURLINFO info, char **value) {
    return curl_easy_getinfo(handle, info, value);
}
static inline CURLMcode pr_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}
static inline CURLSHcode pr_share_setopt_data(CURLSH *share, curl_lock_data data) {
    return curl_share_setopt(share, CURLSHOPT_SHARE, data);
}
static inline CURLcode pr_message_result(const CURLMsg *message) { return message->data.result; }

static const long PR_CURLAUTH_BASIC = (long)CURLAUTH_BASIC;
static const long PR_CURLAUTH_DIGEST = (long)CURLAUTH_DIGEST;
static const long PR_CURL_HTTP_VERSION_2TLS = (long)CURL_HTTP_VERSION_2TLS;
static const CURLversion PR_CURLVERSION_NOW = CURLVERSION_NOW;
static const long PR_CURL_GLOBAL_DEFAULT = (long)CURL_GLOBAL_DEFAULT;
#endif
