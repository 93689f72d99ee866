import Logging
import PushConfig
import Synchronization

/// Log lines that outsiders or counts drive (refused webhook calls), at most one of a kind per
/// interval: the first is logged at once; the others until the interval ends are counted and
/// said in one line when it ends (``flush()``, which ``run()`` calls each interval), with the
/// last of them. So 500 forged calls make two lines, not 500.
final class LogSummary<C: Clock>: Sendable where C.Duration == Duration {
    private struct Kind {
        var level: Logger.Level
        /// When the line of this kind was last logged.
        var lastLogged: C.Instant
        /// Lines of this kind since then, not logged.
        var held = 0
        var last = ""
    }

    private let interval: Duration
    private let clock: C
    private let logger: Logger
    private let kinds = Mutex<[String: Kind]>([:])

    init(interval: Duration, clock: C, logger: Logger) {
        self.interval = interval
        self.clock = clock
        self.logger = logger
    }

    /// A line of `kind`: logged now when none of its kind was in the current interval, else
    /// counted for the next ``flush()``.
    func note(_ kind: String, level: Logger.Level, _ line: String) {
        let now = clock.now
        let logNow = kinds.withLock { kinds -> Bool in
            if var known = kinds[kind], known.lastLogged.advanced(by: interval) > now {
                known.held += 1
                known.last = line
                kinds[kind] = known
                return false
            }
            kinds[kind] = Kind(level: level, lastLogged: now)
            return true
        }
        if logNow { logger.log(level: level, "\(line)") }
    }

    /// Says how many lines of each kind were held since it was last logged, with the last one.
    func flush() {
        let now = clock.now
        let held = kinds.withLock { kinds -> [(Logger.Level, Int, String)] in
            var held: [(Logger.Level, Int, String)] = []
            for (name, kind) in kinds where kind.held > 0 {
                held.append((kind.level, kind.held, kind.last))
                kinds[name] = Kind(level: kind.level, lastLogged: now)
            }
            return held
        }
        for (level, count, last) in held {
            let more = count > 1 ? " (and \(count - 1) more like it in the last \(DurationText(interval)))" : ""
            logger.log(level: level, "\(last)\(more)")
        }
    }

    /// Flushes every interval until the task is cancelled, then once more.
    func run() async {
        while !Task.isCancelled {
            do { try await clock.sleep(for: interval) } catch { break }
            flush()
        }
        flush()
    }
}
