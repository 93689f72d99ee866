import PushScheduler
import Testing
import PushTestThreads

@Suite("Retry-After parsing", .blockingThreads)
struct RetryAfterTests {
    /// Sun, 06 Nov 1994 08:49:37 GMT, the example date of RFC 9110.
    static let rfcExample: Int64 = 784_111_777

    @Test("delta-seconds", arguments: [
        ("120", Int64(120)), ("0", 0), (" 7\t", 7), ("0042", 42), ("99999999999999999999999", Int64.max),
    ])
    func deltaSeconds(text: String, seconds: Int64) {
        #expect(RetryAfter.parse(text) == .seconds(seconds))
    }

    @Test("IMF-fixdate", arguments: [
        ("Sun, 06 Nov 1994 08:49:37 GMT", rfcExample),
        ("sun, 06 nov 1994 08:49:37 GMT", rfcExample),
        ("Thu, 01 Jan 1970 00:00:00 GMT", 0),
        ("Wed, 31 Dec 1969 23:59:59 GMT", -1),
        ("Tue, 29 Feb 2000 00:00:00 GMT", 951_782_400),
        ("Tue, 19 Jan 2038 03:14:08 GMT", 2_147_483_648),
        ("Fri, 31 Dec 9999 23:59:59 GMT", 253_402_300_799),
        ("  Sun, 06 Nov 1994 08:49:37 GMT  ", rfcExample),
    ])
    func imfFixdate(text: String, epoch: Int64) {
        #expect(RetryAfter.parse(text) == .date(epochSeconds: epoch))
    }

    @Test("The obsolete RFC 850 form")
    func rfc850() {
        #expect(RetryAfter.parse("Sunday, 06-Nov-94 08:49:37 GMT") == .date(epochSeconds: Self.rfcExample))
        #expect(RetryAfter.parse("Thursday, 01-Jan-70 00:00:00 GMT") == .date(epochSeconds: 0))
        // With the current time, a year more than 50 years ahead is from the previous century.
        let mid2025: Int64 = 1_750_000_000
        #expect(RetryAfter.parse("Sunday, 06-Nov-94 08:49:37 GMT", nowEpochSeconds: mid2025) == .date(epochSeconds: Self.rfcExample))
        #expect(RetryAfter.parse("Tuesday, 01-Jan-30 00:00:00 GMT", nowEpochSeconds: mid2025) == .date(epochSeconds: 1_893_456_000))
        #expect(RetryAfter.parse("Wednesday, 01-Jan-70 00:00:00 GMT", nowEpochSeconds: mid2025) == .date(epochSeconds: 3_155_760_000))
        #expect(RetryAfter.parse("Saturday, 01-Jan-77 00:00:00 GMT", nowEpochSeconds: mid2025) == .date(epochSeconds: 220_924_800))
    }

    @Test("The asctime form")
    func asctime() {
        #expect(RetryAfter.parse("Sun Nov  6 08:49:37 1994") == .date(epochSeconds: Self.rfcExample))
        #expect(RetryAfter.parse("Sun Nov 06 08:49:37 1994") == .date(epochSeconds: Self.rfcExample))
        #expect(RetryAfter.parse("Wed Nov 16 08:49:37 1994") == .date(epochSeconds: Self.rfcExample + 10 * 86_400))
    }

    @Test("Junk is rejected", arguments: [
        "", " ", "abc", "-5", "+5", "5.0", "5s", "1 2", "0x10", "١٢",
        "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Nov 1994 08:49:37", "Sun, 06 Nov 1994 08:49:37 GMT+1",
        "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 94 08:49:37 GMT", "Sunday, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 31 Feb 1994 08:49:37 GMT", "Sun, 29 Feb 1900 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:60:00 GMT", "Sun, 06 Nov 1994 8:49:37 GMT",
        "Sun, 00 Nov 1994 08:49:37 GMT", "Sun,06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT\r\n",
        "Sun, 06-Nov-94 08:49:37 GMT", "Sunday, 06-Nov-1994 08:49:37 GMT",
        "Sun Nov 6 08:49:37 1994", "Sun Nov  6 08:49:37 94", "Sun Nov  6 08:49:37 1994 GMT",
    ])
    func junk(text: String) {
        #expect(RetryAfter.parse(text) == nil)
    }

    @Test("A delay is never negative: a date in the past waits zero")
    func delays() {
        let now: Int64 = 1_750_000_000
        #expect(RetryAfter.seconds(120).delay(nowEpochSeconds: now) == .seconds(120))
        #expect(RetryAfter.seconds(-3).delay(nowEpochSeconds: now) == .zero)
        #expect(RetryAfter.date(epochSeconds: now + 300).delay(nowEpochSeconds: now) == .seconds(300))
        #expect(RetryAfter.date(epochSeconds: now).delay(nowEpochSeconds: now) == .zero)
        #expect(RetryAfter.date(epochSeconds: Self.rfcExample).delay(nowEpochSeconds: now) == .zero)
        #expect(RetryAfter.date(epochSeconds: .min).delay(nowEpochSeconds: .max) == .zero)
        #expect(RetryAfter.date(epochSeconds: .max).delay(nowEpochSeconds: .min) == .seconds(Int64.max))
    }
}
