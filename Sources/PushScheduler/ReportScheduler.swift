import Synchronization

/// Sends reports when they fall due, at most `concurrency` at a time and `perHostConcurrency` per
/// host, and retries every failure with backoff until it succeeds (SPEC §5).
///
/// The scheduler knows reports only by `Key`; `perform` (or `performBatch`) does the sending and
/// says how it went. All work happens inside ``run()``, the one long-running loop;
/// ``submit(_:host:after:batch:hold:)``, ``cancel(_:)``, ``hold(_:for:)``, ``release(_:)``,
/// ``shutdown()`` and the counters may be called from any task at any time, before or while
/// `run()` runs.
///
/// - Order: due reports start earliest due first (ties: submission order). A due report whose
///   host is at its cap waits in that host's own queue and never holds back other hosts; one
///   whose hold label is held waits for the hold to end and never holds back anything else.
/// - Requests: `concurrency` and `perHostConcurrency` count requests. A report goes out alone,
///   or, submitted with a ``Batching``, in a batch with the due reports of its group: one request,
///   counted against the host of its first report.
/// - Holds: a label held with ``hold(_:for:)`` keeps the reports submitted with it from starting
///   (a paused service, SPEC §9.0). A 429 or 503 of such a report holds its label for the report's
///   retry delay by itself. Attempts in flight are never affected.
/// - One attempt per key: a key submitted again while its attempt is in flight starts its new
///   submission after that attempt returns, whose result is then ignored.
/// - Time: waits use only the injected `clock`, jitter only the injected generator, and
///   `Retry-After` dates are read against the injected `wallClock`, so a test drives it all.
/// - Events: `onEvent` is called from the task running `run()`, in order, one at a time, and
///   outside the scheduler's lock (so it may call `submit`, `cancel` or `shutdown` on the
///   scheduler it is given); it should return quickly.
///
/// ```swift
/// let scheduler = ReportScheduler<String, ContinuousClock>(
///     policy: BackoffPolicy(), concurrency: 32, perHostConcurrency: 8,
///     clock: ContinuousClock(), random: SystemRandomNumberGenerator(),
///     wallClock: { Int64(Date().timeIntervalSince1970) },
///     perform: { account, attempt in await send(account) }
/// )
/// scheduler.submit("johndow", host: "prov.example.com")
/// await scheduler.run()   // until the task is cancelled or shutdown() is called
/// ```
public final class ReportScheduler<Key: Hashable & Sendable, C: Clock>: Sendable where C.Duration == Duration {
    private let clock: C
    private let wallClock: @Sendable () -> Int64
    private let performBatch: @Sendable (_ items: [BatchItem<Key>]) async -> [AttemptResult]
    private let onEvent: @Sendable (SchedulerEvent<Key>, ReportScheduler) -> Void
    private let state: Mutex<State>
    /// Starts requests without a task each (see ``Launcher``); nil: every request runs in a task.
    private let launcher: Launcher?

    /// Starts requests itself, without a task each: a transport that takes many requests at
    /// once and answers in batches (SPEC §5 is unchanged: the scheduler still decides what
    /// starts and when). `launch` is given every request a turn of the loop starts, and says
    /// which it took; the others run in tasks with `performBatch`. Each one taken must be
    /// finished with ``finished(_:)``, also when `cancel` (called once, when `run()`'s task is
    /// cancelled with requests in flight) aborts it.
    public struct Launcher: Sendable {
        public var launch: @Sendable (_ requests: [Launch]) -> [Bool]
        public var cancel: @Sendable () -> Void

        public init(launch: @escaping @Sendable (_ requests: [Launch]) -> [Bool], cancel: @escaping @Sendable () -> Void) {
            self.launch = launch
            self.cancel = cancel
        }
    }

    /// A request the loop starts: its id (for ``finished(_:)``) and its reports.
    public struct Launch: Sendable {
        public var id: UInt64
        public var items: [BatchItem<Key>]
    }

    /// Creates a scheduler that sends reports one request at a time; nothing runs until ``run()`` is called.
    ///
    /// - Parameters:
    ///   - policy: the backoff of SPEC §5.
    ///   - concurrency: the most requests in flight at once (values below 1 count as 1).
    ///   - perHostConcurrency: the most requests in flight at once to one host (values below 1 count as 1).
    ///   - clock: the clock that due times and waits are measured on.
    ///   - random: the generator the backoff jitter is drawn from.
    ///   - wallClock: the current Unix time in seconds, to turn a `Retry-After` date into a wait.
    ///   - perform: makes attempt number `attempt` (from 1) to deliver the report `key`. It is
    ///     called in a child task of `run()` and is cancelled when `run()`'s task is; it should
    ///     then return promptly (any result; a failure is rescheduled as usual). Reports submitted
    ///     with a ``Batching`` still form batches, whose reports it is called for one after the other.
    ///   - onEvent: told of every start, delivery and failure (see ``SchedulerEvent``), with the
    ///     scheduler itself, so that it can submit, cancel or shut down in answer.
    public convenience init(
        policy: BackoffPolicy,
        concurrency: Int,
        perHostConcurrency: Int,
        clock: C,
        random: some RandomNumberGenerator & Sendable,
        wallClock: @escaping @Sendable () -> Int64,
        perform: @escaping @Sendable (_ key: Key, _ attempt: Int) async -> AttemptResult,
        onEvent: @escaping @Sendable (SchedulerEvent<Key>, ReportScheduler) -> Void = { _, _ in }
    ) {
        self.init(
            policy: policy, concurrency: concurrency, perHostConcurrency: perHostConcurrency, clock: clock,
            random: random, wallClock: wallClock,
            performBatch: { items in
                var results: [AttemptResult] = []
                for item in items { results.append(await perform(item.key, item.attempt)) }
                return results
            },
            onEvent: onEvent
        )
    }

    /// Creates a scheduler that hands each request to `performBatch`, batches whole; nothing runs
    /// until ``run()`` is called.
    ///
    /// - Parameters:
    ///   - policy: the backoff of SPEC §5.
    ///   - concurrency: the most requests in flight at once, a batch counting once (values below 1 count as 1).
    ///   - perHostConcurrency: the most requests in flight at once to one host (values below 1 count as 1).
    ///   - clock: the clock that due times and waits are measured on.
    ///   - random: the generator the backoff jitter is drawn from.
    ///   - wallClock: the current Unix time in seconds, to turn a `Retry-After` date into a wait.
    ///   - performBatch: makes one request for `items` (one report, or the reports of a batch,
    ///     earliest due first) and returns their results in the same order; a result it leaves
    ///     out counts as a failure "no result", one too many is ignored. It is called in a child
    ///     task of `run()` and is cancelled when `run()`'s task is; it should then return
    ///     promptly (any results; failures are rescheduled as usual).
    ///   - onEvent: told of every start, delivery and failure (see ``SchedulerEvent``), per report
    ///     in the order of the batch, with the scheduler itself, so that it can submit, cancel or
    ///     shut down in answer.
    public init(
        policy: BackoffPolicy,
        concurrency: Int,
        perHostConcurrency: Int,
        clock: C,
        random: some RandomNumberGenerator & Sendable,
        wallClock: @escaping @Sendable () -> Int64,
        performBatch: @escaping @Sendable (_ items: [BatchItem<Key>]) async -> [AttemptResult],
        launcher: Launcher? = nil,
        onEvent: @escaping @Sendable (SchedulerEvent<Key>, ReportScheduler) -> Void = { _, _ in }
    ) {
        self.clock = clock
        self.wallClock = wallClock
        self.performBatch = performBatch
        self.launcher = launcher
        self.onEvent = onEvent
        self.state = Mutex(State(
            queue: SchedulerQueue(
                policy: policy, concurrency: Swift.max(concurrency, 1), perHostConcurrency: Swift.max(perHostConcurrency, 1)
            ),
            random: AnySendableGenerator(random)
        ))
    }

    /// Schedules the report `key` to `host`, due `delay` from now on the clock.
    ///
    /// A key already pending is replaced: its attempt count starts again from 1 and its due time
    /// is the new one, and its `batch` and `hold` are the new ones. A key in flight keeps running,
    /// its result is ignored, and the new submission starts after it returns (never before its
    /// due time). `host` is the key that `perHostConcurrency` counts by; it may differ between
    /// submissions of a key.
    ///
    /// - Parameters:
    ///   - key: the report.
    ///   - host: what `perHostConcurrency` counts it by.
    ///   - delay: how long from now until it is due; a negative delay counts as zero.
    ///   - batch: when its `limit` is above 1, the report goes out in one request with the other
    ///     reports of an equal `batch` due when it starts (see ``Batching``).
    ///   - hold: the label (e.g. the service) whose ``hold(_:for:)`` keeps the report from
    ///     starting. When an attempt of the report fails with 429 or 503, the label is held for
    ///     the report's retry delay (which honours `Retry-After`), so every report of the label
    ///     waits with it. Without a label only the failing report waits.
    public func submit(_ key: Key, host: String, after delay: Duration = .zero, batch: Batching? = nil, hold: String? = nil) {
        let due = clock.now.advanced(by: Swift.max(delay, .zero))
        wake { $0.submit(key, host: host, due: due, batch: batch, hold: hold) }
    }

    /// One report to submit with ``submit(_:)``.
    public struct Submission: Sendable {
        public var key: Key
        public var host: String
        public var delay: Duration
        public var batch: Batching?
        public var hold: String?

        public init(key: Key, host: String, after delay: Duration = .zero, batch: Batching? = nil, hold: String? = nil) {
            self.key = key
            self.host = host
            self.delay = delay
            self.batch = batch
            self.hold = hold
        }
    }

    /// Schedules several reports at once, as ``submit(_:host:after:batch:hold:)`` does each, but
    /// under one lock and with one wake-up: reports due together that may share a batch are all
    /// queued before the loop starts any of them, so they go out together.
    public func submit(_ submissions: [Submission]) {
        guard !submissions.isEmpty else { return }
        let now = clock.now
        wake { queue in
            queue.reserveCapacity(forAdding: submissions.count)
            for submission in submissions {
                queue.submit(submission.key, host: submission.host, due: now.advanced(by: Swift.max(submission.delay, .zero)),
                             batch: submission.batch, hold: submission.hold)
            }
        }
    }

    /// Keeps the reports submitted with the hold label `label` from starting for `duration` from
    /// now on the clock, or, when `duration` is nil, until ``release(_:)``.
    ///
    /// A hold already in place that ends later stays as it is (one without end beats any time):
    /// only ``release(_:)`` shortens a hold. Attempts in flight are not affected. Reports that
    /// fall due meanwhile start once the hold ends, earliest due first.
    public func hold(_ label: String, for duration: Duration?) {
        let end = duration.map { clock.now.advanced(by: Swift.max($0, .zero)) }
        wake { $0.hold(label, until: end) }
    }

    /// Ends the hold of `label` at once; its due reports may start. A label not held is ignored.
    public func release(_ label: String) {
        wake { $0.release(label) }
    }

    /// Changes the queue under the lock, then wakes the loop to act on it.
    private func wake(after change: (inout SchedulerQueue<Key, C.Instant>) -> Void) {
        let wakeup = state.withLock { state in
            change(&state.queue)
            return state.takeWakeup()
        }
        wakeup?.resume()
    }

    /// Forgets the report `key`: a pending submission is dropped, and the result of an attempt in
    /// flight is ignored (no event is sent for it). Unknown keys are ignored.
    public func cancel(_ key: Key) {
        state.withLock { $0.queue.cancel(key) }
    }

    /// Stops starting attempts: ``run()`` returns once the attempts in flight have finished.
    ///
    /// Their events are still delivered, and a failed one is rescheduled as usual, so
    /// ``pendingCount`` tells what is still owed. Shutdown is final: a later `run()` returns as
    /// soon as nothing is in flight, and submissions are only recorded.
    public func shutdown() {
        let wakeup = state.withLock { state in
            state.isShuttingDown = true
            return state.takeWakeup()
        }
        wakeup?.resume()
    }

    /// How many reports wait for their next attempt (due or not, including a re-submission
    /// that waits for its key's attempt in flight).
    public var pendingCount: Int {
        state.withLock { $0.queue.pendingCount }
    }

    /// How many reports wait for their first attempt: submitted, not started, not failed yet.
    public var firstAttemptsWaiting: Int {
        state.withLock { $0.queue.firstAttemptsWaiting }
    }

    /// How many reports have an attempt running (each report of a batch counts).
    public var inFlightCount: Int {
        state.withLock { $0.queue.inFlightCount }
    }

    /// How many requests are running: a batch counts once, as it does against `concurrency`.
    public var inFlightRequests: Int {
        state.withLock { $0.queue.inFlightRequests }
    }

    /// Runs the scheduler until its task is cancelled or ``shutdown()`` is called.
    ///
    /// Starts every attempt that is due and allowed by the caps, each in a child task, then
    /// sleeps on the clock until the next due time, waking early when a submission or a
    /// finished attempt changes the picture. When the task is cancelled the attempts in flight
    /// are cancelled too; either way it returns only after every attempt it started has
    /// finished and been accounted for. Only one `run()` may be active at a time.
    public func run() async {
        let alreadyRunning = state.withLock { state in
            defer { state.isRunning = true }
            return state.isRunning
        }
        precondition(!alreadyRunning, "ReportScheduler.run() is already running")
        defer { state.withLock { $0.isRunning = false } }

        // What was launched is aborted as soon as this task is cancelled (the loop may be
        // waiting for what is in flight, not for cancellation), and again by the loop's first
        // turn that sees it, for what it launched meanwhile.
        await withTaskCancellationHandler {
            await runLoop()
        } onCancel: {
            launcher?.cancel()
        }
    }

    private func runLoop() async {
        await withDiscardingTaskGroup { group in
            var launchedCancelled = false
            while true {
                let now = clock.now
                let nowEpochSeconds = wallClock()
                let isCancelled = Task.isCancelled
                let step = state.withLock { state in
                    state.step(now: now, nowEpochSeconds: nowEpochSeconds, isCancelled: isCancelled)
                }
                for event in step.events { onEvent(event, self) }
                if isCancelled, !launchedCancelled, let launcher {
                    // The tasks are cancelled with this one; what was launched is aborted here.
                    launchedCancelled = true
                    launcher.cancel()
                }
                let launches = step.starts.map { request in
                    Launch(id: request.id, items: request.items.map { BatchItem(key: $0.key, attempt: $0.attempt) })
                }
                for launch in launches {
                    for item in launch.items { onEvent(.started(item.key, attempt: item.attempt), self) }
                }
                let taken = launches.isEmpty ? [] : launcher?.launch(launches) ?? []
                for (index, launch) in launches.enumerated() where index >= taken.count || !taken[index] {
                    group.addTask {
                        let results = await self.performBatch(launch.items)
                        self.finished(Completion(request: launch.id, results: results))
                    }
                }
                switch step.wait {
                case .finished:
                    return
                case .wakeup(let cancellable):
                    await waitForWakeup(cancellable: cancellable)
                case .deadline(let deadline):
                    await sleep(until: deadline)
                }
            }
        }
    }

    private func finished(_ completion: Completion) {
        let wakeup = state.withLock { state in
            state.completions.append(completion)
            return state.takeWakeup()
        }
        wakeup?.resume()
    }

    /// Requests a ``Launcher`` took are over: each one's id and its reports' results, in the
    /// order of its reports (as `performBatch` returns them). One lock and one wake-up for all.
    public func finished(_ completions: [(id: UInt64, results: [AttemptResult])]) {
        guard !completions.isEmpty else { return }
        let wakeup = state.withLock { state in
            for completion in completions { state.completions.append(Completion(request: completion.id, results: completion.results)) }
            return state.takeWakeup()
        }
        wakeup?.resume()
    }

    /// Suspends until the clock reaches `deadline` or something wakes the loop, whichever is first.
    private func sleep(until deadline: C.Instant) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await self.clock.sleep(until: deadline, tolerance: nil) }
            group.addTask { await self.waitForWakeup(cancellable: true) }
            _ = await group.next()
            group.cancelAll()
        }
    }

    /// Suspends until `submit`, `shutdown` or a finished attempt wakes the loop (at once if one
    /// already did since the last step), or, if `cancellable`, until the task is cancelled.
    private func waitForWakeup(cancellable: Bool) async {
        let id = state.withLock { state in
            state.lastWaiterID += 1
            return state.lastWaiterID
        }
        let wait = {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = self.state.withLock { state in
                    if state.isSignalled {
                        state.isSignalled = false
                        return true
                    }
                    if cancellable && Task.isCancelled { return true }
                    state.waiter = Waiter(id: id, continuation: continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
        guard cancellable else { return await wait() }
        await withTaskCancellationHandler {
            await wait()
        } onCancel: {
            let continuation = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
                guard let waiter = state.waiter, waiter.id == id else { return nil }
                state.waiter = nil
                return waiter.continuation
            }
            continuation?.resume()
        }
    }
}

extension ReportScheduler {
    /// The results of a request, waiting for the loop to account for them.
    struct Completion: Sendable {
        var request: UInt64
        var results: [AttemptResult]
    }

    /// The loop, suspended until something changes.
    struct Waiter {
        var id: UInt64
        var continuation: CheckedContinuation<Void, Never>
    }

    /// What one turn of the loop decided.
    struct Step {
        enum Wait {
            /// Return from `run()`.
            case finished
            /// Wait for a submission or a finished attempt (and for cancellation if `cancellable`).
            case wakeup(cancellable: Bool)
            /// Sleep until this time unless woken earlier.
            case deadline(C.Instant)
        }

        var events: [SchedulerEvent<Key>] = []
        var starts: [SchedulerQueue<Key, C.Instant>.Request] = []
        var wait: Wait
    }

    /// Everything behind the lock.
    struct State {
        var queue: SchedulerQueue<Key, C.Instant>
        var random: AnySendableGenerator
        var completions: [Completion] = []
        var waiter: Waiter?
        /// A wake-up arrived while the loop was not waiting; its next wait returns at once.
        var isSignalled = false
        var lastWaiterID: UInt64 = 0
        var isShuttingDown = false
        var isRunning = false

        /// Wakes the loop: returns its continuation to resume outside the lock, or leaves a signal.
        mutating func takeWakeup() -> CheckedContinuation<Void, Never>? {
            guard let waiter else {
                isSignalled = true
                return nil
            }
            self.waiter = nil
            return waiter.continuation
        }

        /// Accounts for finished attempts and picks what to start and how to wait.
        ///
        /// Everything that happened before this point is seen here, so an earlier signal is spent.
        mutating func step(now: C.Instant, nowEpochSeconds: Int64, isCancelled: Bool) -> Step {
            isSignalled = false
            var events: [SchedulerEvent<Key>] = []
            for completion in completions {
                events += queue.finish(
                    request: completion.request, results: completion.results,
                    now: now, nowEpochSeconds: nowEpochSeconds, using: &random
                )
            }
            completions.removeAll(keepingCapacity: true)

            if isCancelled || isShuttingDown {
                let wait: Step.Wait = queue.inFlightRequests == 0 ? .finished : .wakeup(cancellable: false)
                return Step(events: events, wait: wait)
            }
            let starts = queue.takeStartable(now: now)
            let wait: Step.Wait = queue.nextDeadline(now: now).map { .deadline($0) } ?? .wakeup(cancellable: true)
            return Step(events: events, starts: starts, wait: wait)
        }
    }
}
