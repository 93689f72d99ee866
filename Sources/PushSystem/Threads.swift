#if canImport(Glibc)
import Glibc
#endif

/// A thread of its own, for work that blocks (reading files ahead of a load, waiting for
/// inotify events) and must not hold a thread of Swift's cooperative pool.
package struct OwnThread: @unchecked Sendable {
    private let thread: pthread_t

    /// Starts `body` on a new thread named `name` (at most 15 bytes show, in `top -H` and
    /// debuggers); nil when the system cannot start one. A detached thread cannot be joined.
    package init?(named name: String, detached: Bool, _ body: @escaping @Sendable () -> Void) {
        final class Start {
            let name: String
            let body: @Sendable () -> Void
            init(name: String, body: @escaping @Sendable () -> Void) {
                self.name = name
                self.body = body
            }
        }
        let start = Unmanaged.passRetained(Start(name: name, body: body))
        var thread = pthread_t()
        let status = pthread_create(&thread, nil, { argument in
            let start = Unmanaged<Start>.fromOpaque(argument!).takeRetainedValue()
            _ = nameThread(pthread_self(), String(decoding: start.name.utf8.prefix(15), as: UTF8.self))
            Allocator.keyThisThreadsHeap()
            start.body()
            return nil
        }, start.toOpaque())
        guard status == 0 else {
            start.release()
            return nil
        }
        if detached { pthread_detach(thread) }
        self.thread = thread
    }

    /// Waits for a thread started without `detached` to end.
    package func join() {
        pthread_join(thread, nil)
    }
}

/// The value `body` returns on a thread of its own, for another thread to wait for.
package final class ThreadResult<Value: Sendable>: @unchecked Sendable {
    private let result = ConditionLock<Value?>(nil)

    /// Starts `body` on a thread named `name`; nil when none can start.
    package init?(named name: String, _ body: @escaping @Sendable () -> Value) {
        let started = OwnThread(named: name, detached: true) { [result] in
            let value = body()
            result.change { $0 = value }
        }
        guard started != nil else { return nil }
    }

    /// Waits for `body` to return, and takes its value (once).
    package func take() -> Value {
        result.wait(until: { $0 != nil }) { $0.take()! }
    }
}

/// State shared by threads that wait for each other's progress: a mutex with a condition
/// variable. Every change wakes the waiters.
package final class ConditionLock<State>: @unchecked Sendable {
    private var state: State
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let changed = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    package init(_ state: State) {
        self.state = state
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(changed, nil)
    }

    deinit {
        pthread_cond_destroy(changed)
        pthread_mutex_destroy(mutex)
        changed.deallocate()
        mutex.deallocate()
    }

    /// Changes the state and wakes the waiters.
    package func change<R>(_ body: (inout State) -> R) -> R {
        pthread_mutex_lock(mutex)
        defer {
            pthread_cond_broadcast(changed)
            pthread_mutex_unlock(mutex)
        }
        return body(&state)
    }

    /// Reads the state, waking no one.
    package func read<R>(_ body: (State) -> R) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body(state)
    }

    /// Waits until `ready` holds, then changes the state with `body` and wakes the waiters.
    package func wait<R>(until ready: (State) -> Bool, then body: (inout State) -> R) -> R {
        pthread_mutex_lock(mutex)
        defer {
            pthread_cond_broadcast(changed)
            pthread_mutex_unlock(mutex)
        }
        while !ready(state) { pthread_cond_wait(changed, mutex) }
        return body(&state)
    }

    /// Waits until `ready` holds, then changes the state with `body` and wakes the waiters; nil
    /// when `timeout` passes first. `note` is told when the caller starts waiting (true) and
    /// stops (false), under the lock, so that the state can count the waiters.
    package func wait<R>(until ready: (State) -> Bool, timeout: Duration, whileWaiting note: (inout State, Bool) -> Void,
                         then body: (inout State) -> R) -> R? {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let (seconds, attoseconds) = timeout.components
        var nanoseconds = Int(now.tv_nsec) + Int(attoseconds / 1_000_000_000)
        var deadline = timespec(tv_sec: now.tv_sec + Int(seconds) + nanoseconds / 1_000_000_000, tv_nsec: 0)
        nanoseconds %= 1_000_000_000
        deadline.tv_nsec = nanoseconds
        pthread_mutex_lock(mutex)
        defer {
            pthread_cond_broadcast(changed)
            pthread_mutex_unlock(mutex)
        }
        if !ready(state) {
            note(&state, true)
            while !ready(state) {
                if pthread_cond_timedwait(changed, mutex, &deadline) == ETIMEDOUT && !ready(state) { break }
            }
            note(&state, false)
        }
        return ready(state) ? body(&state) : nil
    }
}

/// glibc's `pthread_setname_np` (declared only under `_GNU_SOURCE`, so not by the Glibc module).
@_silgen_name("pthread_setname_np")
private func nameThread(_ thread: pthread_t, _ name: UnsafePointer<CChar>) -> Int32
