import PushSystem
#if canImport(Glibc)
import Glibc
#endif

/// Tells the service manager how the agent is doing (systemd's notify protocol, SPEC §8).
///
/// The agent owns this protocol; ``SystemdNotifier`` speaks it to systemd, and tests record.
public protocol ServiceManagerNotifier: Sendable {
    /// Sends one message of newline-separated `KEY=VALUE` assignments, e.g. `READY=1`.
    func notify(_ message: String)
}

/// The systemd notify protocol, written natively: one datagram per message to the Unix socket
/// named by `$NOTIFY_SOCKET` (`@` at its start names the abstract namespace). Without that
/// variable every message is dropped.
///
/// ``notify(_:)`` never waits: a datagram socket whose reader does not keep up (at most
/// `net.unix.max_dgram_qlen` datagrams wait, 10 by default) makes `sendto` block, and blocked on
/// Swift's cooperative pool by a burst of reloads and `STATUS=` lines, it stopped every report,
/// the watchdog and SIGTERM. Messages go to a queue, sent in order by a thread of their own; while
/// they wait, a newer `STATUS=`-only message replaces an older one, and `WATCHDOG=1` is not
/// queued twice, so the queue stays short however long the reader is away.
public final class SystemdNotifier: ServiceManagerNotifier {
    private let socket: Int32
    private let address: sockaddr_un?
    private let addressLength: socklen_t
    private let queue: ConditionLock<[String]>
    /// The most messages that wait; past it the oldest goes.
    static let queueLimit = 64

    /// - Parameter environment: the process environment; `NOTIFY_SOCKET` is read from it.
    public init(environment: [String: String]) {
        queue = ConditionLock([])
        guard let path = environment["NOTIFY_SOCKET"], !path.isEmpty, path.utf8.count < 108,
              path.hasPrefix("/") || path.hasPrefix("@") else {
            socket = -1
            address = nil
            addressLength = 0
            return
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        if bytes[0] == UInt8(ascii: "@") { bytes[0] = 0 }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        self.address = address
        // Abstract names are not NUL-terminated: the length says where they end.
        addressLength = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (bytes[0] == 0 ? 0 : 1))
        socket = Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socket >= 0 else { return }
        // The sender lives as long as the process: the notifier is made once per agent.
        _ = OwnThread(named: "pushrep-notify", detached: true) { [self] in sendForever() }
    }

    /// Queues `message` for the service manager and returns at once; does nothing when
    /// `$NOTIFY_SOCKET` named no socket.
    public func notify(_ message: String) {
        guard socket >= 0 else { return }
        queue.change { Self.enqueue(message, into: &$0) }
    }

    /// Adds `message` to `queue`, replacing what it makes stale.
    static func enqueue(_ message: String, into queue: inout [String]) {
        if message.hasPrefix("STATUS=") && !message.contains("\n") {
            queue.removeAll { $0.hasPrefix("STATUS=") && !$0.contains("\n") }
        } else if message == "WATCHDOG=1", queue.contains(message) {
            return
        }
        queue.append(message)
        if queue.count > queueLimit { queue.removeFirst(queue.count - queueLimit) }
    }

    private func sendForever() {
        guard var address else { return }
        while true {
            let message = queue.wait(until: { !$0.isEmpty }) { $0.removeFirst() }
            let bytes = Array(message.utf8)
            // Blocks while the socket is full: on this thread only.
            _ = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                    bytes.withUnsafeBytes { sendto(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), socketAddress, addressLength) }
                }
            }
        }
    }

    /// `MONOTONIC_USEC=` for a `RELOADING=1` message: CLOCK_MONOTONIC in microseconds.
    public static func monotonicMicroseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
    }

    /// Half the watchdog interval systemd asked for (`WATCHDOG_USEC`, for this process when
    /// `WATCHDOG_PID` is set); nil when there is no watchdog.
    public static func watchdogInterval(environment: [String: String]) -> Duration? {
        guard let text = environment["WATCHDOG_USEC"], let microseconds = UInt64(text), microseconds > 0 else { return nil }
        if let pid = environment["WATCHDOG_PID"], let value = Int32(pid), value != getpid() { return nil }
        return .microseconds(Int64(microseconds / 2))
    }
}

/// Tells nobody: for `run --once` and `remove`, which systemd does not wait on.
public struct NoNotifier: ServiceManagerNotifier {
    public init() {}
    public func notify(_ message: String) {}
}
