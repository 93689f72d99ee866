import PushSystem

/// Runs `body`, which blocks (a state database's round trip, up to its timeouts), on a thread
/// outside Swift's cooperative pool (``BlockingPool``), and waits for it to end without holding
/// a pool thread: a database that stops answering must not starve the scheduler, the endpoint
/// or the watchdog, which share that pool's few threads (two on a two-core machine).
func offPool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await BlockingPool.shared.runToEnd(body)
}

/// ``offPool(_:)`` for a body that throws a typed error.
func offPool<T: Sendable, E: Error>(throwing body: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
    let result: Result<T, E> = await offPool {
        do throws(E) { return .success(try body()) } catch { return .failure(error) }
    }
    return try result.get()
}
