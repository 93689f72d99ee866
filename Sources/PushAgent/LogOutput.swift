import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import PushSystem
import Synchronization

/// Where log lines and the terminal's progress line go: standard error, one writer at a time.
///
/// Under journald (`JOURNAL_STREAM` set) lines carry `<N>` syslog priority prefixes and no
/// timestamps; otherwise they are timestamped text, or JSON objects with `--log-format json`.
/// On a terminal a progress line may sit at the bottom; log lines are written above it.
public final class LogOutput: Sendable {
    /// How log lines look.
    public enum Format: String, Sendable, CaseIterable {
        /// `2026-11-21T18:20:01.123Z warning: message`, or `<4>message` under journald.
        case text
        /// One JSON object per line: `time`, `level`, `message` and metadata.
        case json
    }

    private struct State {
        var progress: String?
    }

    public let format: Format
    /// True when stderr is a journald stream: priorities as `<N>` prefixes, no timestamps.
    public let journal: Bool
    /// True when stderr is a terminal, so a progress line can be drawn.
    public let isTerminal: Bool
    private let state = Mutex(State())
    private let write: @Sendable (String) -> Void

    /// - Parameters:
    ///   - environment: the process environment (`JOURNAL_STREAM` decides journald mode).
    ///   - write: where the text goes; standard error by default.
    public init(format: Format = .text, environment: [String: String] = ProcessInfo.processInfo.environment,
                isTerminal: Bool = isatty(STDERR_FILENO) == 1,
                write: @escaping @Sendable (String) -> Void = LogOutput.standardError) {
        self.format = format
        journal = environment["JOURNAL_STREAM"].map { !$0.isEmpty } ?? false
        self.isTerminal = isTerminal && !journal
        self.write = write
    }

    public static let standardError: @Sendable (String) -> Void = { text in
        writeAll(text, to: STDERR_FILENO)
    }

    /// Standard error through a thread of its own, for the long-running agent: a journal that
    /// stops reading makes `write(2)` block once the pipe is full, and a line written from
    /// Swift's cooperative pool then held every thread of it (reports, the watchdog, SIGTERM).
    /// Lines wait in memory while the reader is away, up to 4 MiB; past that they are dropped
    /// and counted, and the count is said once the reader is back. ``drain(within:)`` waits for
    /// what is queued, before the process exits.
    public static let queuedStandardError: @Sendable (String) -> Void = { text in
        queue.write(text)
    }

    /// Waits up to `limit` for the lines ``queuedStandardError`` holds to be written.
    public static func drain(within limit: Duration) {
        queue.drain(within: limit)
    }

    private static let queue = QueuedWriter(fd: STDERR_FILENO, limit: 4 << 20)

    /// Writes all of `text` to `fd`, unless it fails.
    static func writeAll(_ text: String, to fd: Int32) {
        var text = text
        text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 && errno == EINTR { continue }
                if written <= 0 { break }
                offset += written
            }
        }
    }

    /// Writes one log line (a newline is added), keeping any progress line below it.
    public func line(_ text: String) {
        state.withLock { state in
            if let progress = state.progress {
                write("\r\u{1B}[K" + text + "\n" + progress)
            } else {
                write(text + "\n")
            }
        }
    }

    /// Draws or replaces the progress line (terminals only; ignored elsewhere).
    public func progress(_ text: String) {
        guard isTerminal else { return }
        state.withLock { state in
            state.progress = text
            write("\r\u{1B}[K" + text)
        }
    }

    /// Removes the progress line.
    public func clearProgress() {
        state.withLock { state in
            guard state.progress != nil else { return }
            state.progress = nil
            write("\r\u{1B}[K")
        }
    }
}

/// Text written to a file descriptor by a thread of its own (``LogOutput/queuedStandardError``).
final class QueuedWriter: Sendable {
    private struct Queue {
        var texts: [String] = []
        var bytes = 0
        var dropped = 0
        /// Whether the thread is writing a text it took.
        var writing = false
        var started = false
    }

    private let fd: Int32
    private let limit: Int
    private let queue = ConditionLock(Queue())

    init(fd: Int32, limit: Int) {
        self.fd = fd
        self.limit = limit
    }

    /// Queues `text`, or counts it as dropped when `limit` bytes already wait.
    func write(_ text: String) {
        let start = queue.change { queue -> Bool in
            if queue.bytes + text.utf8.count > limit && !queue.texts.isEmpty {
                queue.dropped += 1
            } else {
                queue.texts.append(text)
                queue.bytes += text.utf8.count
            }
            defer { queue.started = true }
            return !queue.started
        }
        // The thread starts with the first line: a command that logs nothing makes none.
        if start { _ = OwnThread(named: "pushrep-log", detached: true) { [self] in run() } }
    }

    private func run() {
        while true {
            let (texts, dropped) = queue.wait(until: { !$0.texts.isEmpty || $0.dropped > 0 }) { queue -> ([String], Int) in
                defer {
                    queue.texts = []
                    queue.bytes = 0
                    queue.dropped = 0
                    queue.writing = true
                }
                return (queue.texts, queue.dropped)
            }
            LogOutput.writeAll(texts.joined(), to: fd)
            if dropped > 0 {
                LogOutput.writeAll("\(dropped) log \(dropped == 1 ? "line was" : "lines were") dropped while standard error was not read\n", to: fd)
            }
            queue.change { $0.writing = false }
        }
    }

    /// Waits up to `limit` until everything queued is written.
    func drain(within limit: Duration) {
        _ = queue.wait(until: { $0.texts.isEmpty && $0.dropped == 0 && !$0.writing }, timeout: limit,
                       whileWaiting: { _, _ in }) { _ in () }
    }
}
