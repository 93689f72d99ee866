@testable import PushConfig
import Testing
import PushTestThreads

@Suite("DurationParser and the URL scheme check", .blockingThreads)
struct DurationParserTests {
    @Test("durations as configurations write them", arguments: [
        ("500ms", 500), ("5s", 5_000), ("15m", 900_000), ("24h", 86_400_000), ("1d", 86_400_000),
        ("30", 30_000), ("1.5", 1_500), ("0.5s", 500), (".5s", 500), ("0", 0), ("2.5ms", 3),
    ])
    func reads(text: String, milliseconds: Int64) {
        #expect(DurationParser.parse(text) == .milliseconds(milliseconds))
    }

    @Test("anything else is not a duration", arguments: [
        "", "s", "ms", "m", "5x", "5 s", " 5s", "5S", "5sm", "-1s", "1e3", "1.2.3s", "５s", "5ｓ", "inf", "nan", "5s\u{301}",
        "99999999999999999999s",
    ])
    func rejects(text: String) {
        #expect(DurationParser.parse(text) == nil)
    }

    @Test("a URL starts with http:// or https://, in any case", arguments: [
        ("http://a", true), ("https://a", true), ("HTTPS://a", true), ("HtTp://", true), ("http:/a", false),
        ("https:a", false), ("ftp://a", false), ("httpss://a", false), ("http", false), ("", false), (" http://a", false),
        ("hxxp://a", false), ("htt\u{212A}p://a", false),
    ])
    func scheme(text: String, expected: Bool) {
        #expect(URLText.hasHTTPPrefix(text) == expected)
    }
}
