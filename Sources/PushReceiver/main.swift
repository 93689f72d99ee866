// pushreporter-receiver: the demo receiver of `make run`. It listens on 127.0.0.1, prints every
// request it is sent and answers each with a fixed status and `{}`, except the Customer Insights –
// Journeys device-registration paths (`/api/v1.0/orgs/{org}/pushdeviceregistration/…`), which it
// answers as `FakeJourneysServer` does, for any org, MobileAppId and ApiToken: registrations 202
// (with a RegistrationRequestId when tracked), status queries 200 with `Success`, cleanups 202; and
// Firebase's device-group and token paths (`/fcm/notification`, `/token`), which it answers as
// `FakeFCMServer` does, for any project, key and access token: groups created, added to and
// removed from, access tokens given for any assertion.
//
//   pushreporter-receiver [--port N] [--port-file PATH] [--count N] [--status CODE]
//
// --port N        listen on port N (default: a free ephemeral port)
// --port-file P   write the port to P once listening (atomically: a reader never sees half of it)
// --count N       exit 0 after answering N requests (default: run until SIGTERM or SIGINT, then exit 0)
// --status CODE   the status of every answer but the Journeys ones (default 200)
//
// A bad argument prints one line to standard error and exits 64 (EX_USAGE).
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import PushTestSupport
import Synchronization

/// The command line, parsed by hand: four flags, each `--flag value` or `--flag=value`.
struct ReceiverOptions {
    static let usage = "usage: pushreporter-receiver [--port N] [--port-file PATH] [--count N] [--status CODE]"

    var port = 0
    var portFile: String?
    var count: Int?
    var status = 200

    /// Parses `arguments` (without the program name); throws a one-line message.
    init(_ arguments: [String]) throws(UsageError) {
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            var flag = argument
            var value: String?
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                flag = String(argument[..<equals])
                value = String(argument[argument.index(after: equals)...])
            }
            func takeValue() throws(UsageError) -> String {
                if let value { return value }
                guard let next = remaining.popFirst() else { throw UsageError("\(flag) needs a value") }
                return next
            }
            func number(_ range: ClosedRange<Int>) throws(UsageError) -> Int {
                let text = try takeValue()
                guard let number = Int(text), range.contains(number) else {
                    throw UsageError("\(flag) must be a number from \(range.lowerBound) to \(range.upperBound), not '\(text)'")
                }
                return number
            }
            switch flag {
            case "--help", "-h": throw UsageError.help
            case "--port": port = try number(0...65535)
            case "--port-file":
                let path = try takeValue()
                guard !path.isEmpty else { throw UsageError("--port-file needs a path") }
                portFile = path
            case "--count": count = try number(1...Int.max)
            case "--status": status = try number(200...599)
            default: throw UsageError("unknown argument '\(argument)'")
            }
        }
    }
}

struct UsageError: Error {
    var message: String
    init(_ message: String) { self.message = message }

    /// `--help`: what the flags do, on standard output, exit 0.
    static let help = UsageError("")
    var isHelp: Bool { message.isEmpty }
}

extension ReceiverOptions {
    static let help = """
        \(usage)

        Listens on 127.0.0.1, prints every request it is sent and answers it (the demo receiver of
        `make run`): Journeys and Firebase paths as their fake servers do, everything else with
        --status and `{}`. Those paths are taken, so point test accounts elsewhere:
        /api/v1.0/orgs/… (Journeys), /fcm/… and /token (Firebase; a GET there is answered 405).

          --port N        listen on port N (default: a free ephemeral port)
          --port-file P   write the port to P once listening
          --count N       exit 0 after answering N requests (default: run until SIGTERM or SIGINT)
          --status CODE   the status of every other answer (default 200)

        """
}

/// Writes `text` to standard error as one line, prefixed with the program's name.
func complain(_ text: String) {
    try? FileHandle.standardError.write(contentsOf: Data("pushreporter-receiver: \(text)\n".utf8))
}

/// One request as the receiver prints it: a rule with its number and connection, the request line,
/// the headers, a blank line and the body (when there is one), then a blank line.
func describe(_ request: LoopbackHTTPServer.Request, number: Int) -> String {
    let title = "── request \(number) (connection \(request.connectionID)) "
    var text = title + String(repeating: "─", count: max(3, 60 - title.count)) + "\n"
    text += "\(request.method) \(printable(request.target))\n"
    for field in request.headers { text += "\(printable(field.name)): \(printable(field.value))\n" }
    text += "\n"
    if !request.body.isEmpty {
        if let body = String(validating: request.body, as: UTF8.self) {
            text += printable(body, keepingNewlines: true)
            if !body.hasSuffix("\n") { text += "\n" }
        } else {
            text += "(\(request.body.count) bytes, not UTF-8)\n"
        }
        text += "\n"
    }
    return text
}

/// `text` with control characters (which could drive a terminal) shown as `\u{…}` escapes.
func printable(_ text: String, keepingNewlines: Bool = false) -> String {
    var result = ""
    for scalar in text.unicodeScalars {
        let kept = scalar == "\t" || (keepingNewlines && scalar == "\n")
        if !kept && (scalar.value < 0x20 || (0x7F..<0xA0).contains(scalar.value)) {
            result += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
        } else {
            result.unicodeScalars.append(scalar)
        }
    }
    return result
}

/// Writes `port` to `path` through a temporary file in the same directory and a rename.
func writePortFile(_ path: String, port: Int) throws {
    let temporary = path + ".tmp-\(getpid())"
    try Data("\(port)\n".utf8).write(to: URL(fileURLWithPath: temporary))
    guard rename(temporary, path) == 0 else {
        let error = String(cString: strerror(errno))
        unlink(temporary)
        throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: error])
    }
}

let options: ReceiverOptions
do {
    options = try ReceiverOptions(Array(CommandLine.arguments.dropFirst()))
} catch where error.isHelp {
    print(ReceiverOptions.help, terminator: "")
    exit(0)
} catch {
    complain("\(error.message) (\(ReceiverOptions.usage))")
    exit(64)
}

// SIGTERM and SIGINT are blocked before any thread starts (threads inherit the mask) and taken by
// sigwait on one thread, so they end the run cleanly instead of killing the process.
var stopSignals = sigset_t()
sigemptyset(&stopSignals)
sigaddset(&stopSignals, SIGTERM)
sigaddset(&stopSignals, SIGINT)
pthread_sigmask(SIG_BLOCK, &stopSignals, nil)

// Requests are numbered as they are printed (under the lock), so the numbers on the screen count
// up even when handlers on two connections race.
let printed = Mutex(0)
let status = options.status
let server: FakeJourneysServer
do {
    // The FCM fake answers through this server's port; its own stays unused.
    let fcm = try FakeFCMServer(recording: false, checksCredentials: false)
    server = try FakeJourneysServer(port: options.port, recording: false, checksCredentials: false) { request, index, journeys in
        printed.withLock { count in
            count += 1
            // A reader that went away is no reason to stop answering.
            try? FileHandle.standardOutput.write(contentsOf: Data(describe(request, number: count).utf8))
        }
        return journeys ?? fcm.reply(to: request, index: index) ?? .status(status, contentType: "application/json", body: "{}")
    }
} catch {
    complain("cannot listen on 127.0.0.1:\(options.port): \(error)")
    exit(1)
}

if let portFile = options.portFile {
    do {
        try writePortFile(portFile, port: server.port)
    } catch {
        complain("cannot write the port to \(portFile): \(error.localizedDescription)")
        server.stop()
        exit(1)
    }
}
complain("listening on \(server.baseURL)")

let finished = DispatchSemaphore(value: 0)
let signals = stopSignals
Thread {
    var signal: Int32 = 0
    var waited = signals
    _ = sigwait(&waited, &signal)
    finished.signal()
}.start()
if let count = options.count {
    Thread {
        if server.waitForReplies(count, timeout: .seconds(365 * 24 * 3600)) { finished.signal() }
    }.start()
}
finished.wait()
server.stop()
exit(0)
