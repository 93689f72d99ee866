@testable import PushTransport
import Testing
import PushTestThreads

/// Requests to this machine never go through a proxy (SPEC §12): the cached answer is always
/// the one libcurl's own reading of the URL gives.
@Suite(.blockingThreads) struct LoopbackCacheTests {
    @Test func everyURLGetsTheAnswerOfLibcurlsReadingWhateverCameBefore() {
        let urls = [
            "http://127.0.0.1:8080/token?a=1", "http://127.0.0.1:8080/other", "http://127.0.0.1:8080?x", "http://127.0.0.1:8080",
            "http://127.0.0.1:80801/x", "http://127.0.0.1.example.com/x", "https://push.example.com/v1", "https://push.example.com#f",
            "http://localhost/x", "http://api.localhost:9/x", "http://[::1]:9000/x", "http://[::1]:9000", "http://10.0.0.1/x",
            "http://user@127.0.0.1/x", "http://127.0.0.1@evil.example/x", "http://127.0.0.1%2F@evil.example/x", "not a url", "",
            "http://LOCALHOST/x", "http://127.0.0.1:8080/token?a=1",
        ]
        var cache = LoopbackCache()
        for _ in 0..<2 {
            for url in urls {
                #expect(cache.isLoopback(url) == CurlTransfer.isLoopbackURL(url), "\(url)")
            }
            for url in urls.reversed() {
                #expect(cache.isLoopback(url) == CurlTransfer.isLoopbackURL(url), "\(url)")
            }
        }
    }
}
