import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
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
        var text = text
        text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(STDERR_FILENO, bytes.baseAddress! + offset, bytes.count - offset)
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
