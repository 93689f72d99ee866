import PushSystem
import PushBackend
import PushState
import PushScheduler
import Synchronization
import Logging
import PushConfig
import PushListener
import ServiceLifecycle

/// The agent's HTTP endpoint (SPEC §9.5, `agent.listen`): `GET /metrics` (Prometheus text, its
/// size independent of the number of accounts), `GET /livez` (200 while the agent's loops
/// turn), `GET /readyz` and its alias `/health` (200 when the agent is ready to send, else 503
/// and why), and the backends' webhooks (`POST /journeys/{service}/{account}`). It serves on threads of its own and asks
/// the agent only for short, locked reads and updates: a request, good or bad, never holds the
/// scheduler.
public struct AgentEndpoint<C: Clock>: Service where C.Duration == Duration {
    let address: ListenAddress
    let agent: Agent<C>
    let logger: Logger

    public init(address: ListenAddress, agent: Agent<C>, logger: Logger) {
        self.address = address
        self.agent = agent
        self.logger = logger
    }

    public func run() async throws {
        let server: HTTPEndpoint
        do {
            server = try HTTPEndpoint(host: address.host, port: address.port) { [agent] request in agent.answer(request) }
        } catch {
            // The agent goes on without its endpoint: reports matter more than metrics.
            logger.error("agent.listen: \(error.description); the agent runs without its HTTP endpoint")
            return
        }
        var bound = address
        bound.port = server.port
        logger.info("serving /metrics, /livez, /readyz and webhooks on \(bound)")
        try? await gracefulShutdown()
        server.stop()
    }
}

extension Agent {
    /// What the endpoint answers `request`.
    func answer(_ request: HTTPEndpoint.Request) -> HTTPEndpoint.Response {
        core.answer(request)
    }
}

extension AgentCore {
    /// What the endpoint answers `request`.
    func answer(_ request: HTTPEndpoint.Request) -> HTTPEndpoint.Response {
        let segments = request.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        if segments.count == 1, let route = Route(rawValue: segments[0]) {
            guard request.method == "GET" || request.method == "HEAD" else { return HTTPEndpoint.Response(status: 405, body: "use GET\n") }
            switch route {
            case .metrics:
                return HTTPEndpoint.Response(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", bytes: metricsText())
            case .livez:
                return liveness(at: .now)
            case .readyz, .health:
                return readiness()
            }
        }
        guard segments.count == 3, let receiver = webhookReceiver(segments[0]) else {
            return HTTPEndpoint.Response(status: 404, body: "no such path\n")
        }
        guard request.method == "POST" else { return HTTPEndpoint.Response(status: 405, body: "use POST\n") }
        return webhook(receiver, service: Self.percentDecoded(segments[1]), account: Self.percentDecoded(segments[2]),
                       body: request.body)
    }

    /// The endpoint's own paths (the backends' webhooks have theirs).
    enum Route: String {
        case metrics, livez, readyz, health
    }

    /// `text` with its `%XX` escapes decoded (a malformed one is kept as it is).
    static func percentDecoded(_ text: String) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(text.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "%"), utf8.count >= 2,
               let value = UInt8(String(decoding: utf8.prefix(2), as: UTF8.self), radix: 16) {
                bytes.append(value)
                utf8 = utf8.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
