import Foundation
import Synchronization

/// A program started in the background (the long-running agent), with its standard error
/// collected as it comes, so a test can signal it, wait for a log line and reap it.
///
/// Killed with SIGKILL when deinitialised if it still runs.
public final class RunningProcess: @unchecked Sendable {
    private let process = Process()
    private let errorText = TextBox()
    private let outputText = TextBox()
    private let readers: [Thread]

    /// Starts `executable`; the environment is ``ProcessRunner/childEnvironment(adding:)``.
    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessRunner.childEnvironment(adding: environment)
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let errorText = self.errorText, outputText = self.outputText
        func reader(_ pipe: Pipe, into text: TextBox) -> Thread {
            Thread {
                let handle = pipe.fileHandleForReading
                while true {
                    let data = handle.availableData
                    if data.isEmpty { break }
                    text.value.withLock { $0 += String(decoding: data, as: UTF8.self) }
                }
            }
        }
        readers = [reader(err, into: errorText), reader(out, into: outputText)]
        for thread in readers { thread.start() }
    }

    /// Starts the built `pushreporter` with `arguments`.
    public convenience init(pushreporter arguments: [String], environment: [String: String] = [:]) throws {
        try self.init(ProcessRunner.pushreporter, arguments, environment: environment)
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    public var pid: Int32 { process.processIdentifier }

    /// Standard error so far.
    public var stderr: String { errorText.value.withLock { $0 } }

    /// Standard output so far.
    public var stdout: String { outputText.value.withLock { $0 } }

    public func signal(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Waits until standard error contains `text` `count` times, or `timeout` passes.
    @discardableResult
    public func waitForStderr(_ text: String, count: Int = 1, timeout: Duration = Polling.generous) -> Bool {
        let end = ContinuousClock.now + timeout
        while ContinuousClock.now < end {
            if stderr.components(separatedBy: text).count - 1 >= count { return true }
            if !process.isRunning { return stderr.components(separatedBy: text).count - 1 >= count }
            usleep(10_000)
        }
        return false
    }

    /// Waits for the process to end and returns its exit status (128 + signal when killed), or
    /// nil if it still runs after `timeout`.
    public func waitForExit(timeout: Duration = Polling.generous) -> Int32? {
        let end = ContinuousClock.now + timeout
        while process.isRunning {
            if ContinuousClock.now > end { return nil }
            usleep(10_000)
        }
        // Let the readers drain the pipes.
        while readers.contains(where: { !$0.isFinished }) { usleep(1_000) }
        return process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
    }

    /// Waits until the process blocks `signal` (its main thread's `SigBlk` in `/proc`), so that a
    /// test can send it at the start without racing the dynamic loader and the runtime's start,
    /// where no program can catch a signal yet. (`Process` passes the spawning thread's mask on,
    /// so a child of a test thread may have it blocked from exec on.)
    public func waitUntilBlocking(_ signal: Int32, timeout: Duration = Polling.generous) -> Bool {
        Polling.until(timeout: timeout) {
            guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
                  let line = status.split(separator: "\n").first(where: { $0.hasPrefix("SigBlk:") }),
                  let mask = UInt64(line.dropFirst("SigBlk:".count).trimmingCharacters(in: .whitespaces), radix: 16) else {
                return false
            }
            return mask & (1 << UInt64(signal - 1)) != 0
        }
    }

    /// Waits until the process watches files with inotify (`run --watch` has added its watches),
    /// so that a change the test makes next is seen.
    public func waitUntilWatchingFiles(timeout: Duration = Polling.generous) -> Bool {
        Polling.until(timeout: timeout) {
            let directory = "/proc/\(pid)/fdinfo"
            let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            return descriptors.contains { name in
                (try? String(contentsOfFile: directory + "/" + name, encoding: .utf8))?.contains("inotify wd:") == true
            }
        }
    }
}

/// Text that a reader thread appends to.
private final class TextBox: Sendable {
    let value = Mutex("")
}
