@testable import PushConfig
import Testing
import PushTestThreads

@Suite("DurationParser and the URL scheme check", .blockingThreads)
struct DurationParserTests {
    @Test("durations as configurations write them", arguments: [
        ("500ms", 500), ("5s", 5_000), ("15m", 900_000), ("24h", 86_400_000), ("1d", 86_400_000),
        ("30", 30_000), ("1.5", 1_500), ("0.5s", 500), (".5s", 500), ("0", 0), ("2.5ms", 3),
        ("1h30m", 5_400_000), ("2m30s", 150_000), ("1d12h", 129_600_000), ("1h0m5s", 3_605_000),
        ("1m30s500ms", 90_500), ("1.5h30m", 7_200_000),
    ])
    func reads(text: String, milliseconds: Int64) {
        #expect(DurationParser.parse(text) == .milliseconds(milliseconds))
    }

    @Test("anything else is not a duration", arguments: [
        "", "s", "ms", "m", "5x", "5 s", " 5s", "5S", "5sm", "-1s", "1e3", "1.2.3s", "５s", "5ｓ", "inf", "nan", "5s\u{301}",
        "99999999999999999999s",
        // Compounds go from the largest unit down, each unit once, every number with its unit.
        "30m1h", "1h1h", "1h30", "30 1h", "1h 30m", "1hm", "5s5ms5s", "1h-30m", "h30m", "1h30x",
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
