import PushSystem
import PushScheduler
import Synchronization
import Logging
import PushBackend
import PushConfig
import PushState
import ServiceLifecycle

/// Reloads (SPEC §5): on each request of its sources (SIGHUP, changed files with `--watch`)
/// the configuration is loaded again, off Swift's pool; a valid one goes to the book, which
/// sends what changed and cleans up what left, and an invalid one changes nothing and says why.
/// `RELOADING=1` and `READY=1` frame each reload. What a reload changes is sent once the state
/// it recorded is written (``releaseHeld()``). Until graceful shutdown.
struct ReloadService<C: Clock>: Service where C.Duration == Duration {
    /// A source of reload requests (SIGHUP, changed files): it yields a reason each time, and
    /// returns when its task is cancelled.
    typealias Source = @Sendable (AsyncStream<String>.Continuation) async -> Void

    let core: AgentCore<C>
    /// Loads the configuration again (it reads files, so it runs off Swift's pool).
    let load: @Sendable () -> ConfigurationLoad
    let sources: [Source]

    func run() async {
        let (reloads, continuation) = AsyncStream<String>.makeStream(bufferingPolicy: .bufferingNewest(1))
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                // A source may end long before the agent does (--watch that cannot watch): the
                // others, and the reloads already asked for, go on.
                for source in sources {
                    group.addTask { await source(continuation) }
                }
                group.addTask { await releaseHeld() }
                // Until graceful shutdown cancels this task.
                for await reason in reloads { await reload(reason: reason) }
                group.cancelAll()
            }
        }
        continuation.finish()
    }

    func reload(reason: String) async {
        let (logger, notifier) = (core.logger, core.notifier)
        guard !core.isStopping else { return }
        notifier.notify("RELOADING=1\nMONOTONIC_USEC=\(SystemdNotifier.monotonicMicroseconds())")
        logger.info("reloading the configuration (\(reason))")
        let load = load
        /// The reload is not applied: said in the log and in `STATUS=`, counted.
        func failed(_ message: String, status why: String) {
            logger.error("\(message)")
            core.state.withLock { $0.statusNote = "reload failed, previous configuration kept: \(why)" }
            core.metrics.reloaded(successfully: false, at: Double(core.wallClock()) / 1000)
        }
        reloading: switch await offPool(load) {
        case .invalid(let why):
            failed("the new configuration is invalid, so the previous one keeps running: \(why)", status: why)
        case .loaded(let plans, let newPollers, let newSettings, let warnings):
            // The cleanups the book let go of that this reload replaces or removes, read back
            // from the state first (``AgentBook+CleanupTexts``).
            let readBack = core.state.withLock { $0.book.beginReadingBack(for: plans) }
            var texts: [SubscriptionKey: String] = [:]
            if !readBack.isEmpty {
                let recorder = core.recorder
                switch await offPool({ () -> Result<[SubscriptionKey: String], StateError> in
                    Result { () throws(StateError) in try recorder.storedCleanups(of: readBack) }
                }) {
                case .success(let read): texts = read
                case .failure(let error):
                    core.state.withLock { $0.book.endReadingBack(isPending: core.recorder.isPending) }
                    failed("the new configuration is not applied, so the previous one keeps running: the stored removal requests of "
                           + "the subscriptions it changes or removes cannot be read: \(error.description)", status: "the state cannot be read")
                    break reloading
                }
            }
            let now = core.wallClock()
            // `remove --held` asked for the held removals: this reload sends them, as without the guard.
            let releasing = core.releaseRequested()
            if releasing { logger.notice("pushreporter remove --held asked for the held removals: this reload sends them") }
            // Cancels and state changes now; what the reload submits is held in the book (no
            // attempt of a changed subscription starts) until the state is written, which
            // ``releaseHeld()`` waits for: a state that cannot be written holds those
            // subscriptions, not the reload (READY=1 goes out now).
            let summary = core.state.withLock { state in
                state.defaultTimeout = newSettings.timeout
                state.metricsPerAccount = newSettings.metricsPerAccount
                state.book.removalGuard = releasing ? nil : newSettings.removalGuard
                for key in state.book.restoreCleanups(texts, asked: readBack) { logger.unreadableCleanup(of: key) }
                let (actions, summary) = state.book.reload(plans: plans, reportInterval: newSettings.reportInterval, now: now)
                state.book.removalGuard = newSettings.removalGuard
                core.apply(actions, in: &state)
                state.book.endReadingBack(isPending: core.recorder.isPending)
                if core.shared != nil {
                    // This configuration counts now: new subscriptions for whichever agent claims
                    // them, dropped ones for their holders to clean up, written to the database
                    // once the reload's state is (a database away must not hold the reload).
                    state.disagreed = []
                    state.pendingPublish = plans.map(\.key)
                }
                state.statusNote = nil
                state.announceWhenSettled = true
                state.releaseWhenAnswered = true
                return summary
            }
            core.metrics.reloaded(successfully: true, at: Double(now) / 1000)
            core.replacePollers(newPollers)
            core.heldChanges.yield()
            for key in core.state.withLock({ $0.book.takeUnreadableCleanups() }) { logger.unreadableCleanup(of: key) }
            let held = summary.held > 0 ? ", \(summary.held) removals held" : ""
            logger.info("reloaded: \(summary.added) new, \(summary.changed) changed, \(summary.unchanged) unchanged, \(summary.removed) removed\(held)")
            core.sayHeldRemovals()
            // As at start: the fix an operator reloaded may itself be misspelt.
            for warning in warnings { logger.warning("\(warning.formatted)", metadata: warning.logFields) }
            for kind in AgentBook.ReloadSummary.Kind.allCases {
                let total = switch kind { case .added: summary.added; case .changed: summary.changed; case .removed: summary.removed }
                guard let keys = summary.named[kind], !keys.isEmpty else { continue }
                let more = total > keys.count ? " and \(total - keys.count) more" : ""
                logger.debug("reloaded, \(kind.rawValue): \(keys.map { $0.description.displayEscaped }.joined(separator: ", "))\(more)")
            }
            let waiting = core.settings.waitingForRestart(newSettings)
            if !waiting.isEmpty {
                logger.notice("\(waiting.joined(separator: ", ")) changed; \(waiting.count == 1 ? "it takes" : "they take") effect when the agent restarts, and until then the agent keeps the values it started with")
            }
        }
        guard !core.isStopping else { return }
        notifier.notify("READY=1\nSTATUS=\(core.statusText())")
        core.changed()
    }

    /// Until cancelled: once the reloads have held subscriptions, writes the state they
    /// recorded (trying again every second while it cannot be written), then lets them go to the
    /// scheduler; with shared state, then writes the configuration the last reload loaded.
    private func releaseHeld() async {
        for await _ in core.heldChanges.stream {
            let through = core.state.withLock { $0.book.reloads }
            guard await core.flushUntilWritten() else { return }
            core.state.withLock { state in core.apply(state.book.releaseHeld(through: through), in: &state) }
            core.changed()
            do {
                try await core.publishConfiguration()
            } catch {
                // The leases' next round writes it.
                core.logger.error("\(error.description); the configuration is written to it once it is back")
            }
        }
    }
}
