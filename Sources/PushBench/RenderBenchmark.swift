import PushTemplates

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `pushreporter-bench`: how many times per second one thread renders the Acrobits GET template
/// (SPEC §3 "rendering allocates little and is measured by a benchmark"). Run by `make bench`.
///
/// Usage: `pushreporter-bench [SECONDS]` (default 2). Exits 1 when the first rendering is not the
/// expected URL, so a wrong engine can never report a fast figure.
@main
enum RenderBenchmark {
    static let template = "https://example.com/token/?username=%account[username]%&password=%account[password]%"
        + "&selector=%selector%&token_msgs=%pushTokenOther%&appid_msgs=%pushappid_other%"
        + "&token_calls=%pushTokenIncomingCall%&appid_calls=%pushappid_incoming_call%"

    static let expected = "https://example.com/token/?username=johndow&password=12345678"
        + "&selector=12869E0E6E553673C54F29105A0647204C416A2A:7C3A0D14"
        + "&token_msgs=QVBBOTFiRzlhcVd2bW54bllCWldHOWh4dnRrZ3pUWFNvcGZpdWZ6bWM2dFAzS2J"
        + "&appid_msgs=com.cloudsoftphone.app"
        + "&token_calls=Udl99X2JFP1bWwS5gR%2FwGeLE1hmAB2CMpr1Ej0wxkrY%3D"
        + "&appid_calls=com.cloudsoftphone.app.pushkit"

    static let goal = 1_000_000.0

    static func main() {
        let arguments = CommandLine.arguments.dropFirst()
        let seconds = arguments.first.flatMap(Double.init) ?? 2.0

        var scope = BenchScope()
        let compilation = Template.compile(template, kind: .url, scope: &scope)
        guard let compiled = compilation.template else {
            fail("the benchmark template did not compile: \(compilation.issues.map(\.message))")
        }
        let values = BenchValues(scope: scope, seed: [
            "account[username]": "johndow",
            "account[password]": "12345678",
            "selector": "12869E0E6E553673C54F29105A0647204C416A2A:7C3A0D14",
            "pushTokenOther": "QVBBOTFiRzlhcVd2bW54bllCWldHOWh4dnRrZ3pUWFNvcGZpdWZ6bWM2dFAzS2J",
            "pushappid_other": "com.cloudsoftphone.app",
            "pushTokenIncomingCall": "Udl99X2JFP1bWwS5gR/wGeLE1hmAB2CMpr1Ej0wxkrY=",
            "pushappid_incoming_call": "com.cloudsoftphone.app.pushkit",
        ])

        let first: String
        do { first = try compiled.render(values) } catch { fail("rendering failed: \(error.message)") }
        guard first == expected else {
            fail("the rendered URL is wrong\n  got:      \(first)\n  expected: \(expected)")
        }

        // Warm up caches and the allocator, then measure in batches so reading the clock costs
        // nothing noticeable. Every rendering's length and one byte feed a checksum that is
        // printed, so the optimiser cannot drop the work.
        var checksum = 0
        _ = renderBatch(compiled, values, count: 10_000, checksum: &checksum)
        let clock = ContinuousClock()
        let budget = Duration.milliseconds(Int64(seconds * 1000))
        let start = clock.now
        var renders = 0
        var elapsed = Duration.zero
        repeat {
            renders += renderBatch(compiled, values, count: 4096, checksum: &checksum)
            elapsed = clock.now - start
        } while elapsed < budget

        let secondsElapsed = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let rate = Double(renders) / secondsElapsed
        let nanoseconds = secondsElapsed * 1e9 / Double(renders)
        let verdict = rate >= goal ? "ok" : "BELOW GOAL"
        print("render Acrobits GET URL: \(grouped(Int(rate)))/s   (\(format(nanoseconds, 1)) ns each, "
              + "\(grouped(renders)) renders in \(format(secondsElapsed, 2)) s, 1 thread)   "
              + "goal >= \(grouped(Int(goal)))/s   \(verdict)   [checksum \(checksum)]")
    }

    @inline(never)
    static func renderBatch(_ template: Template, _ values: BenchValues, count: Int, checksum: inout Int) -> Int {
        for _ in 0..<count {
            do {
                let url = try template.render(values)
                checksum &+= url.utf8.count &+ Int(url.utf8.last ?? 0)
            } catch {
                fail("rendering failed: \(error.message)")
            }
        }
        return count
    }

    static func fail(_ message: String) -> Never {
        let line = Array("pushreporter-bench: \(message)\n".utf8)
        _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        exit(1)
    }

    static func grouped(_ n: Int) -> String {
        var digits = Array(String(n))
        var i = digits.count - 3
        while i > 0 { digits.insert(",", at: i); i -= 3 }
        return String(digits)
    }

    static func format(_ x: Double, _ decimals: Int) -> String {
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let scaled = Int((x * scale).rounded())
        let whole = scaled / Int(scale)
        guard decimals > 0 else { return String(whole) }
        let fraction = String(scaled % Int(scale))
        return "\(whole)." + String(repeating: "0", count: decimals - fraction.count) + fraction
    }
}

/// The benchmark's scope: the device values plus `%account[KEY]%` for any key, one slot each.
struct BenchScope: TemplateScope {
    static let deviceNames = ["selector", "pushToken", "pushTokenIncomingCall", "pushTokenOther",
                              "pushappid", "pushappid_incoming_call", "pushappid_other"]
    /// Slot names in slot order: a device value's name, or `account[KEY]`.
    private(set) var slotNames: [String] = []

    mutating func slot(forVariable name: String) -> Int? {
        guard Self.deviceNames.contains(name) else { return nil }
        return slot(named: name)
    }

    mutating func slot(forVariable name: String, key: String) -> Int? {
        guard name == "account" else { return nil }
        return slot(named: "account[\(key)]")
    }

    var variableNames: [String] { Self.deviceNames }
    var keyedVariableNames: [String] { ["account"] }

    private mutating func slot(named name: String) -> Int {
        if let existing = slotNames.firstIndex(of: name) { return existing }
        slotNames.append(name)
        return slotNames.count - 1
    }
}

/// Values by slot, as an account's resolved values would be.
struct BenchValues: TemplateValues {
    let values: [String]
    let secrets: [Bool]

    init(scope: BenchScope, seed: [String: String]) {
        values = scope.slotNames.map { seed[$0] ?? "" }
        secrets = scope.slotNames.map { $0 == "account[password]" }
    }

    func value(at slot: Int) -> String { values[slot] }
    func isSecret(at slot: Int) -> Bool { secrets[slot] }
}
