import Logging
import PushBackend
import PushConfig
import PushScheduler
import PushState
import PushTransport
import Synchronization

/// Requests sent without a task each (issue 35): when the transport is libcurl's and a
/// backend's requests each go alone and are judged by their answer alone (``DirectSending``,
/// Acrobits), what one turn of the scheduler starts is handed to the transport thread at once,
/// and what one turn of the transport thread finishes comes back at once, to be settled under
/// one lock. A task per request, resumed one at a time, cost more CPU than libcurl itself.
final class DirectFlights: TransportCompletionSink {
    /// One request in flight.
    struct Flight: Sendable {
        var launch: UInt64
        var item: BatchItem<SubscriptionKey>
        var sent: TransportRequest
        var direct: any DirectSending
    }

    let transport: CurlTransport
    /// The backends that send directly, by family (``Backend/directSending``), found once.
    let senders: [String: any DirectSending]
    /// Services seen to be of a backend that does not send directly: skipped at once from then
    /// on. Only a shortcut: a service whose type a reload changed is sent either way.
    let indirectServices = Mutex<Set<String>>([])
    private let flights = Mutex<[UInt64: Flight]>([:])
    /// Completions not settled yet, and whether a task is settling them.
    private let arrived = Mutex<(completions: [TransportCompletion], settling: Bool)>(([], false))
    /// Settles completions (the core's ``AgentCore/settleFlights(_:)``).
    private let settle: @Sendable ([(TransportCompletion, Flight)]) -> Void

    init(transport: CurlTransport, backends: Backends, settle: @escaping @Sendable ([(TransportCompletion, Flight)]) -> Void) {
        self.transport = transport
        var senders: [String: any DirectSending] = [:]
        for backend in backends.all { if let direct = backend.directSending { senders[backend.type] = direct } }
        self.senders = senders
        self.settle = settle
    }

    /// Starts `flights` (their transfer ids taken together).
    func start(_ started: [Flight]) {
        guard !started.isEmpty else { return }
        let first = transport.reserveIDs(started.count)
        flights.withLock { flights in
            for (offset, flight) in started.enumerated() { flights[first + UInt64(offset)] = flight }
        }
        transport.start(started.map(\.sent), firstID: first, sink: self)
    }

    /// Aborts every request in flight: each is settled as cancelled.
    func cancelAll() {
        transport.cancel(flights.withLock { Array($0.keys) })
    }

    /// On the transport thread: queued, and one task settles what has come.
    func transportCompleted(_ completions: [TransportCompletion]) {
        let startsTask = arrived.withLock { arrived -> Bool in
            arrived.completions.append(contentsOf: completions)
            defer { arrived.settling = true }
            return !arrived.settling
        }
        guard startsTask else { return }
        Task { self.settleArrived() }
    }

    /// Settles what has come, batch after batch, until nothing more has.
    private func settleArrived() {
        while true {
            let batch = arrived.withLock { arrived -> [TransportCompletion] in
                if arrived.completions.isEmpty { arrived.settling = false }
                defer { arrived.completions = [] }
                return arrived.completions
            }
            guard !batch.isEmpty else { return }
            let taken = flights.withLock { flights in
                batch.compactMap { completion in flights.removeValue(forKey: completion.id).map { (completion, $0) } }
            }
            settle(taken)
        }
    }
}

extension AgentCore {
    /// The scheduler's requests of one turn that can go without a task: those of one report
    /// whose backend sends directly. Says which it took; the others go to ``perform(_:)``.
    func launch(_ launches: [ReportScheduler<SubscriptionKey, C>.Launch]) -> [Bool] {
        guard let flights = directFlights else { return [] }
        var taken = [Bool](repeating: false, count: launches.count)
        // Leases not renewed in time: ``perform(_:)`` says so for each.
        if leasesLapsed { return taken }
        var started: [DirectFlights.Flight] = []
        var nothingToSend: [(id: UInt64, results: [AttemptResult])] = []
        var indirect = flights.indirectServices.withLock { $0 }
        let known = indirect.count
        state.withLock { state in
            let timeout = state.defaultTimeout
            for index in launches.indices where launches[index].items.count == 1 {
                let item = launches[index].items[0]
                // A service whose backend does not send directly: ``perform(_:)`` sends it.
                if indirect.contains(item.key.service) { continue }
                guard let request = state.book.beginAttempt(item.key) else {
                    // Nothing to send any more (replaced, or held by a reload): done.
                    taken[index] = true
                    nothingToSend.append((launches[index].id, [.delivered]))
                    continue
                }
                guard let direct = flights.senders[request.family] else {
                    // Its attempt begun here is begun again there, which changes nothing.
                    indirect.insert(item.key.service)
                    continue
                }
                guard let sent = direct.transportRequest(request, defaultTimeout: timeout) else { continue }
                taken[index] = true
                started.append(DirectFlights.Flight(launch: launches[index].id, item: item, sent: sent, direct: direct))
            }
        }
        if indirect.count > known { flights.indirectServices.withLock { $0.formUnion(indirect) } }
        flights.start(started)
        scheduler.finished(nothingToSend)
        return taken
    }

    /// Requests sent directly are over: judged by their backend, timed, counted, settled in the
    /// book under one lock, and the scheduler told, as ``perform(_:)`` does for one request.
    func settleFlights(_ finished: [(TransportCompletion, DirectFlights.Flight)]) {
        guard !finished.isEmpty else { return }
        var outcomes: [(BatchItem<SubscriptionKey>, Outcome)] = []
        outcomes.reserveCapacity(finished.count)
        var byService: [String: [Outcome]] = [:]
        for (completion, flight) in finished {
            let outcome = flight.direct.outcome(of: completion.result, for: flight.sent)
            let service = flight.item.key.service
            ObservedTransport.observe(flight.sent, completion.result.mapError { $0 }, took: completion.took, service: service, metrics: metrics, logger: logger)
            outcomes.append((flight.item, outcome))
            byService[service, default: []].append(outcome)
        }
        for (service, serviceOutcomes) in byService { count(serviceOutcomes, of: service) }
        let results = settle(outcomes)
        scheduler.finished(zip(finished, results).map { ($0.1.launch, [$1]) })
        changed()
    }
}
