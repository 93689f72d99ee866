#if canImport(Glibc)
import Glibc
#endif
@testable import PushAgent
import PushTestSupport
import Synchronization
import Testing
import PushTestThreads

/// The notify protocol never makes the agent wait for systemd.
@Suite(.blockingThreads) struct SystemdNotifierTests {
    /// A datagram socket bound at a path of its own, read only when the test says.
    final class Socket {
        let directory = TemporaryDirectory()
        let path: String
        let fd: Int32

        init() throws {
            path = directory.path + "/notify.sock"
            fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let path = path
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
            }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            try #require(bound == 0)
        }

        deinit { close(fd) }

        /// The next datagram, waiting for it up to the usual bound.
        func read() -> String? {
            var probe = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&probe, 1, 60_000) > 0 else { return nil }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            return count < 0 ? nil : String(decoding: buffer[..<count], as: UTF8.self)
        }
    }

    @Test func aReaderThatDoesNotReadKeepsNoCallerWaitingAndLosesNoStateChange() throws {
        let socket = try Socket()
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": socket.path])
        // Far more than the socket's queue takes (net.unix.max_dgram_qlen, 10 by default).
        let done = Mutex(false)
        let caller = OwnTestThread {
            notifier.notify("READY=1\nSTATUS=0 of 100")
            for index in 1...200 {
                notifier.notify("STATUS=\(index) of 200")
                notifier.notify("WATCHDOG=1")
                if index % 50 == 0 { notifier.notify("RELOADING=1") }
            }
            notifier.notify("STOPPING=1")
            done.withLock { $0 = true }
        }
        let returned = Polling.until { done.withLock { $0 } }
        #expect(returned, "notify() waited for the reader")
        // Not joined when it is stuck: the test would hang instead of failing.
        guard returned else { return }
        caller.join()
        // Now systemd reads: every state change, in order; of the STATUS= lines, the newest.
        var received: [String] = []
        while received.last != "STOPPING=1", let message = socket.read() { received.append(message) }
        #expect(received.first == "READY=1\nSTATUS=0 of 100")
        #expect(received.filter { $0 == "RELOADING=1" }.count == 4)
        #expect(received.last == "STOPPING=1")
        #expect(received.contains("STATUS=200 of 200"), "\(received)")
        #expect(received.count < 60, "stale STATUS= and WATCHDOG=1 lines were replaced while they waited: \(received.count)")
    }

    @Test func theQueueKeepsTheStateChangesAndTheNewestStatus() {
        var queue: [String] = []
        for message in ["READY=1", "STATUS=a", "WATCHDOG=1", "STATUS=b", "WATCHDOG=1", "RELOADING=1", "READY=1\nSTATUS=c", "STATUS=d"] {
            SystemdNotifier.enqueue(message, into: &queue)
        }
        #expect(queue == ["READY=1", "WATCHDOG=1", "RELOADING=1", "READY=1\nSTATUS=c", "STATUS=d"])
    }
}

/// A thread of the test's own, joined at the end (the caller that would block).
final class OwnTestThread {
    private var thread = pthread_t()

    init(_ body: @escaping @Sendable () -> Void) {
        final class Box { let body: @Sendable () -> Void; init(_ body: @escaping @Sendable () -> Void) { self.body = body } }
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        pthread_create(&thread, nil, { argument in
            Unmanaged<Box>.fromOpaque(argument!).takeRetainedValue().body()
            return nil
        }, box)
    }

    func join() { pthread_join(thread, nil) }
}
