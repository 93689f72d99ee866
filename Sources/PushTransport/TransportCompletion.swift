/// The end of a request handed to the transport with a sink (``CurlTransport/start(_:sink:)``):
/// its response or the error that stopped it, and how long it took from being handed over.
public struct TransportCompletion: Sendable {
    /// The id ``CurlTransport/start(_:sink:)`` gave the request.
    public let id: UInt64
    public let result: Result<TransportResponse, TransportError>
    public let took: Duration
}

/// Takes the outcomes of requests started with ``CurlTransport/start(_:sink:)``: those that
/// finished in one turn of the transport thread come in one call, on that thread, so it must
/// return quickly (queue them for a task of its own).
public protocol TransportCompletionSink: AnyObject, Sendable {
    func transportCompleted(_ completions: [TransportCompletion])
}

/// The completions of one turn of the transport thread, by sink, handed over together.
struct TurnCompletions {
    private var bySink: [(sink: any TransportCompletionSink, completions: [TransportCompletion])] = []

    mutating func add(_ completion: TransportCompletion, for sink: any TransportCompletionSink) {
        if let index = bySink.firstIndex(where: { $0.sink === sink }) {
            bySink[index].completions.append(completion)
        } else {
            bySink.append((sink, [completion]))
        }
    }

    var isEmpty: Bool { bySink.isEmpty }

    /// Tells each sink of its completions, once, and forgets them.
    mutating func deliver() {
        let batches = bySink
        bySink = []
        for (sink, completions) in batches { sink.transportCompleted(completions) }
    }
}
