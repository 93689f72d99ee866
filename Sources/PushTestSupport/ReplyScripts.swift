/// Replies a test scripted for a fake's next requests (`answerNext`), each for one endpoint or
/// any, used in the order given.
struct ReplyScripts<Endpoint: Equatable> {
    private struct Script {
        var endpoint: Endpoint?
        var remaining: Int
        var reply: LoopbackHTTPServer.Reply
    }

    private var scripts: [Script] = []

    /// Answers the next `count` requests to `endpoint` (any when nil) with `reply`.
    mutating func append(_ count: Int, of endpoint: Endpoint?, with reply: LoopbackHTTPServer.Reply) {
        precondition(count > 0, "answerNext needs a count of at least 1")
        scripts.append(Script(endpoint: endpoint, remaining: count, reply: reply))
    }

    /// The first scripted reply for `endpoint` with answers left, counted as used.
    mutating func take(for endpoint: Endpoint) -> LoopbackHTTPServer.Reply? {
        guard let index = scripts.firstIndex(where: { $0.endpoint == nil || $0.endpoint == endpoint }) else { return nil }
        let reply = scripts[index].reply
        scripts[index].remaining -= 1
        if scripts[index].remaining == 0 { scripts.remove(at: index) }
        return reply
    }
}
