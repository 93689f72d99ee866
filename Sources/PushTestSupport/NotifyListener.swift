import Foundation
import Synchronization

/// A datagram socket standing in for systemd's `$NOTIFY_SOCKET`: it collects every message the
/// agent sends, in order.
public final class NotifyListener: @unchecked Sendable {
    /// The socket's path, for `NOTIFY_SOCKET`.
    public let path: String
    private let fd: Int32
    private let shared = Shared()
    private let directory = TemporaryDirectory(prefix: "notify")

    /// A listener that starts reading once ``startReading()`` is called, as a service manager
    /// that is away (its socket's queue fills: net.unix.max_dgram_qlen, 10 datagrams).
    public static func notReading() throws -> NotifyListener {
        try NotifyListener(reading: false)
    }

    /// Reading from now on, for a listener made with ``notReading()``.
    public func startReading() {
        shared.reading.store(true, ordering: .releasing)
    }

    public convenience init() throws {
        try self.init(reading: true)
    }

    private init(reading: Bool) throws {
        shared.reading.store(reading, ordering: .releasing)
        path = directory.path + "/notify.sock"
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        self.fd = fd
        guard fd >= 0 else { throw LoopbackHTTPServer.SocketError(operation: "socket", code: errno) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let socketPath = path
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in socketPath.utf8.enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else { throw LoopbackHTTPServer.SocketError(operation: "bind", code: errno) }
        // Wake every 100 ms to see whether the listener is gone; the thread closes the socket.
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let shared = self.shared
        let thread = Thread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !shared.stopped.load(ordering: .acquiring) {
                guard shared.reading.load(ordering: .acquiring) else {
                    usleep(100_000)
                    continue
                }
                let count = recv(fd, &buffer, buffer.count, 0)
                if count > 0 {
                    shared.received.withLock { $0.append(String(decoding: buffer[0..<count], as: UTF8.self)) }
                }
            }
            close(fd)
        }
        thread.start()
    }

    deinit {
        shared.stopped.store(true, ordering: .releasing)
    }

    /// Every message so far.
    public var messages: [String] { shared.received.withLock { $0 } }

    /// Waits until a message satisfying `matches` arrived after the first `skipping` messages;
    /// returns its index, or nil after `timeout`.
    public func waitForMessage(after skipping: Int = 0, timeout: Duration = Polling.generous,
                               where matches: (String) -> Bool) -> Int? {
        let end = ContinuousClock.now + timeout
        while ContinuousClock.now < end {
            let all = messages
            if skipping < all.count, let index = all[skipping...].firstIndex(where: matches) { return index }
            usleep(5_000)
        }
        return nil
    }
}

/// What the listener's thread shares with it.
private final class Shared: Sendable {
    let received = Mutex<[String]>([])
    let stopped = Atomic<Bool>(false)
    /// Whether the socket is read (a listener may wait, as a service manager that is away).
    let reading = Atomic<Bool>(true)
}
