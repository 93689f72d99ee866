import ArgumentParser
import Logging
import PushAgent
import PushBackend
import PushCommandKit
import PushConfig
import PushState
import PushTestSupport
import PushTestThreads
import Synchronization

/// The long-running agent in the test's own process, loaded and assembled as `pushreporter run`
/// does it (``AgentSetup``, ``AgentRuntime/assemble(_:environment:transport:load:reloadSources:stopSignals:whenStuck:)``)
/// from a configuration on disk, with a state directory of the test's: what it sends, logs and
/// writes is the agent's own, without a process to start. ``reload()`` is SIGHUP, ``stop()``
/// SIGTERM. Tests of signals, exit codes and the process itself start the binary instead.
///
/// ```swift
/// let agent = try await AgentHarness.start(config: path, stateDir: dir + "/state")
/// #expect(await agent.log.waitFor("all 3 accounts are reported"))
/// #expect(await agent.stop())
/// ```
public final class AgentHarness: Sendable {
    /// Why the agent did not start: the sentences `run` would print.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// What the agent logged, one line at a time, as `run` writes it to standard error (text).
    public let log: LogLines
    private let assembled: AssembledAgent
    private let reloads: AsyncStream<String>.Continuation
    private let running: Task<AgentRuntime.Failure?, Never>
    private let stuck: Flag
    private let ended: Flag

    /// Set once: the shutdown backstop would have ended the process; the agent has ended.
    private final class Flag: Sendable {
        let value = Atomic<Bool>(false)
    }

    private init(log: LogLines, assembled: AssembledAgent, reloads: AsyncStream<String>.Continuation,
                 running: Task<AgentRuntime.Failure?, Never>, stuck: Flag, ended: Flag) {
        self.log = log
        self.assembled = assembled
        self.reloads = reloads
        self.running = running
        self.stuck = stuck
        self.ended = ended
    }

    /// Loads `config` (a file or a directory, as `--config`) and starts the agent on the state
    /// at `stateDir`; throws what `run` would print when the configuration or the state cannot
    /// be used.
    ///
    /// - Parameters:
    ///   - backends: the registry, `Backends.standard` as the executable has it, or with a
    ///     backend of the test's beside them.
    ///   - transport: what sends; nil for libcurl, as `run` sends (to a server of the test's).
    ///   - level: the log level, as `--log-level`.
    public static func start(config: String, stateDir: String, backends: Backends, transport: (any HTTPTransport)? = nil,
                             level: Logger.Level = .info) async throws(Failure) -> AgentHarness {
        let log = LogLines()
        let output = LogOutput(format: .text, environment: [:], isTerminal: false) { log.append($0) }
        let logger = Logger(label: "pushreporter") { _ in AgentLogHandler(output: output, level: level) }
        let options: ConfigOptions
        do {
            options = try ConfigOptions.parse(["--config", config])
        } catch {
            throw Failure(description: ConfigOptions.message(for: error))
        }
        let setup: AgentSetup
        let records: [SubscriptionRecord]
        do throws(AgentSetup.Failure) {
            setup = try AgentSetup(options: options, stateDir: stateDir, logger: logger, backends: backends)
        } catch {
            throw Failure(description: (error.diagnostics.map(\.formatted) + error.lines).joined(separator: "\n"))
        }
        do throws(AgentRuntime.Failure) {
            records = try setup.runtime.records()
        } catch {
            throw Failure(description: error.description)
        }
        let (requests, reloads) = AsyncStream.makeStream(of: String.self)
        let runtime = setup.runtime
        let stuck = Flag()
        let assembled: AssembledAgent
        do throws(AgentRuntime.Failure) {
            assembled = try await runtime.assemble(
                .configuration(plans: setup.plans, records: records, pollers: setup.pollers), environment: [:], transport: transport,
                load: { AgentSetup.reload(options: options, runtime: runtime) },
                reloadSources: [{ continuation in
                    for await reason in requests { continuation.yield(reason) }
                }],
                stopSignals: [],
                whenStuck: { stuck.value.store(true, ordering: .relaxed) })
        } catch {
            throw Failure(description: error.description)
        }
        let ended = Flag()
        // On the tests' own threads, as every service of the group it starts: Swift's pool is
        // shared with tests that block its threads while they wait for a process.
        let running = Task(executorPreference: TestThreads.shared) { () -> AgentRuntime.Failure? in
            defer { ended.value.store(true, ordering: .releasing) }
            do throws(AgentRuntime.Failure) {
                try await assembled.run()
                return nil
            } catch {
                return error
            }
        }
        return AgentHarness(log: log, assembled: assembled, reloads: reloads, running: running, stuck: stuck, ended: ended)
    }

    /// Asks for a reload, as SIGHUP does.
    public func reload() {
        reloads.yield("SIGHUP")
    }

    /// Ends what asks for reloads, as a `--watch` that could not watch ends: the agent runs on,
    /// without reloads.
    public func endReloadRequests() {
        reloads.finish()
    }

    /// Whether the agent has ended (it stopped, or failed) within `limit`.
    public func hasEnded(within limit: Duration) async -> Bool {
        await Polling.until(timeout: limit) { ended.value.load(ordering: .acquiring) }
    }

    /// Stops the agent as SIGTERM does and waits for it to end: true when it stopped cleanly
    /// (no error, and within the shutdown backstop's limit; the test process is not ended when
    /// it does not).
    @discardableResult
    public func stop() async -> Bool {
        reloads.finish()
        await assembled.stop()
        let failure = await running.value
        if let failure { log.append("harness: \(failure.description)\n") }
        return failure == nil && !stuck.value.load(ordering: .relaxed)
    }
}

/// Log lines as they come, for a test to wait on.
public final class LogLines: Sendable {
    private let text = Mutex("")

    public init() {}

    func append(_ more: String) { text.withLock { $0 += more } }

    /// Everything logged so far.
    public var value: String { text.withLock { $0 } }

    /// How many times `fragment` was logged so far.
    public func count(_ fragment: String) -> Int {
        let text = Array(value.utf8), wanted = Array(fragment.utf8)
        guard !wanted.isEmpty, text.count >= wanted.count else { return 0 }
        var found = 0
        var index = 0
        while index + wanted.count <= text.count {
            if text[index..<index + wanted.count].elementsEqual(wanted) {
                found += 1
                index += wanted.count
            } else {
                index += 1
            }
        }
        return found
    }

    /// Waits (without blocking a thread) until `fragment` was logged `count` times, or `timeout` passed.
    public func waitFor(_ fragment: String, count: Int = 1, timeout: Duration = Polling.generous) async -> Bool {
        await Polling.until(timeout: timeout) { self.count(fragment) >= count }
    }
}

extension ConfigOptions {
    /// What ArgumentParser says of arguments it refused.
    static func message(for error: any Error) -> String {
        fullMessage(for: error)
    }
}
