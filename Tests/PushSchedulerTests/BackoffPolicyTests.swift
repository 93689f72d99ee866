import Foundation
import PushScheduler
import PushTestSupport
import Testing
import PushTestThreads

@Suite("Backoff curve and jitter", .blockingThreads)
struct BackoffPolicyTests {
    static let defaultCurve: [Duration] = [5, 10, 20, 40, 80, 160, 320, 640, 1280, 1800, 1800, 1800].map { .seconds($0) }

    @Test("The default nominal delays for failures 1…12 double from 5s and stop at 30m")
    func defaultCurveValues() {
        let policy = BackoffPolicy()
        let curve = (1...12).map { policy.nominalDelay(afterFailure: $0) }
        #expect(curve == Self.defaultCurve)
    }

    @Test("The defaults are SPEC §5's")
    func defaults() {
        let policy = BackoffPolicy()
        #expect(policy.initial == .seconds(5))
        #expect(policy.multiplier == 2)
        #expect(policy.maximum == .seconds(1800))
        #expect(policy.maxRetryAfter == .seconds(3600))
    }

    @Test("Huge failure counts clamp to the maximum instead of overflowing")
    func hugeFailureCounts() {
        let policy = BackoffPolicy()
        for failure in [13, 64, 1_000, 1_000_000, Int.max] {
            #expect(policy.nominalDelay(afterFailure: failure) == .seconds(1800), "failure \(failure)")
        }
        let unbounded = BackoffPolicy(initial: .seconds(1), multiplier: 10, maximum: .seconds(Int64.max))
        #expect(unbounded.nominalDelay(afterFailure: 3) == .seconds(100))
        #expect(unbounded.nominalDelay(afterFailure: Int.max) == .seconds(Int64.max))
        var generator = SeededGenerator(seed: 3)
        let drawn = unbounded.delay(afterFailure: Int.max, using: &generator)
        #expect(drawn >= .seconds(Int64.max / 2) && drawn <= .seconds(Int64.max))
    }

    @Test("Other policies follow initial × multiplier^(n−1), capped")
    func customPolicies() {
        let policy = BackoffPolicy(initial: .milliseconds(500), multiplier: 1.5, maximum: .seconds(2))
        let curve = (1...6).map { policy.nominalDelay(afterFailure: $0) }
        #expect(curve == [.milliseconds(500), .milliseconds(750), .milliseconds(1125), .milliseconds(1687) + .microseconds(500), .seconds(2), .seconds(2)])
        // A multiplier below 1 counts as 1; a first failure numbered below 1 counts as 1.
        let flat = BackoffPolicy(initial: .seconds(3), multiplier: 0.5)
        #expect((1...4).map { flat.nominalDelay(afterFailure: $0) } == Array(repeating: .seconds(3), count: 4))
        #expect(BackoffPolicy().nominalDelay(afterFailure: 0) == .seconds(5))
        // An initial delay above the maximum is cut to it.
        #expect(BackoffPolicy(initial: .seconds(60), maximum: .seconds(10)).nominalDelay(afterFailure: 1) == .seconds(10))
    }

    @Test("Jitter stays in [nominal/2, nominal] and reaches both halves of it")
    func jitterBounds() {
        let policy = BackoffPolicy()
        var generator = SeededGenerator(seed: 0x5EED)
        for failure in 1...12 {
            let nominal = policy.nominalDelay(afterFailure: failure)
            var lowerHalf = 0
            var upperHalf = 0
            var smallest = nominal
            var largest = Duration.zero
            for _ in 0..<2_000 {
                let delay = policy.delay(afterFailure: failure, using: &generator)
                #expect(delay >= nominal / 2 && delay <= nominal, "failure \(failure): \(delay)")
                if delay < nominal * 3 / 4 { lowerHalf += 1 } else { upperHalf += 1 }
                smallest = min(smallest, delay)
                largest = max(largest, delay)
            }
            #expect(lowerHalf > 800 && upperHalf > 800, "failure \(failure): \(lowerHalf) low, \(upperHalf) high")
            #expect(smallest < nominal / 2 + nominal / 50 && largest > nominal - nominal / 50)
        }
    }

    @Test("Jitter is reproducible with the same seed and zero stays zero")
    func jitterIsDeterministic() {
        var first = SeededGenerator(seed: 42)
        var second = SeededGenerator(seed: 42)
        let a = (1...20).map { BackoffPolicy().delay(afterFailure: $0, using: &first) }
        let b = (1...20).map { BackoffPolicy().delay(afterFailure: $0, using: &second) }
        #expect(a == b)
        #expect(Set(a).count > 10)
        #expect(BackoffPolicy.jittered(.zero, using: &first) == .zero)
        #expect(BackoffPolicy(initial: .zero).delay(afterFailure: 3, using: &first) == .zero)
    }

    /// The rows of the table in `BackoffPolicy`'s doc comment: first cell, nominal, range.
    static func documentedRows() throws -> [(failure: String, nominal: String, range: String)] {
        let testFile = URL(fileURLWithPath: #filePath)
        let source = testFile.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/PushScheduler/BackoffPolicy.swift")
        let text = try String(contentsOf: source, encoding: .utf8)
        return text.split(separator: "\n").compactMap { line in
            guard line.hasPrefix("/// |") else { return nil }
            let cells = line.dropFirst(5).split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count == 3, let first = cells[0].first, first.isNumber else { return nil }
            return (cells[0], cells[1], cells[2])
        }
    }

    /// `5s`, `2.5s`, `1m20s`, `30m`: the notation of the doc table.
    static func format(_ duration: Duration) -> String {
        let milliseconds = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        let minutes = milliseconds / 60_000
        let rest = milliseconds % 60_000
        var text = minutes > 0 ? "\(minutes)m" : ""
        if rest != 0 || minutes == 0 {
            text += rest % 1000 == 0 ? "\(rest / 1000)s" : "\(Double(rest) / 1000)s"
        }
        return text
    }

    @Test("The table in BackoffPolicy's doc comment is the default curve")
    func docTableAgrees() throws {
        let policy = BackoffPolicy()
        let rows = try Self.documentedRows()
        #expect(rows.map(\.failure) == ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10+"])
        for row in rows {
            let first = Int(row.failure.filter(\.isNumber))!
            let failures = row.failure.hasSuffix("+") ? [first, first + 1, first + 2, 100] : [first]
            for failure in failures {
                let nominal = policy.nominalDelay(afterFailure: failure)
                #expect(row.nominal == Self.format(nominal), "row \(row.failure), failure \(failure)")
                #expect(row.range == "\(Self.format(nominal / 2)) … \(Self.format(nominal))", "row \(row.failure)")
            }
            if row.failure.hasSuffix("+") {
                #expect(policy.nominalDelay(afterFailure: first - 1) < policy.maximum, "the + row starts where the cap does")
            }
        }
    }
}
