import FoundationEssentials
import PushBackend
import PushConfig

/// A rendered request as the state directory keeps it: the removal request of an account,
/// rendered from the values of its last report (SPEC §5), so that it can be sent after the
/// account has left the configuration, even after a restart.
///
/// Stored as JSON text in the account's record. It holds what the transport needs, secrets
/// included (the state files are 0600 in a 0700 directory, like the configuration's secrets).
public struct StoredRequest: Codable, Equatable, Sendable {
    struct Header: Codable, Equatable, Sendable {
        var name: String
        var value: String
    }

    var method: String
    var url: String
    var headers: [Header]
    var body: String?
    var username: String?
    var password: String?
    /// `<prefix>Timeout` in milliseconds; nil for `agent.timeout`.
    var timeoutMilliseconds: Int64?

    public init(_ request: RenderedRequest) {
        method = request.method
        url = request.url
        headers = request.headers.map { Header(name: $0.name, value: $0.value) }
        body = request.body
        username = request.credentials?.username
        password = request.credentials?.password
        timeoutMilliseconds = request.timeout?.milliseconds
    }

    /// The JSON text kept in the state record: what `JSONEncoder` writes with sorted keys and
    /// unescaped slashes, written directly. Every plan with a removal URL makes one; through
    /// `JSONEncoder` they were 4 % of `run --once`'s CPU (perf, 10,000 accounts).
    public var text: String {
        var out = "{"
        // Its exact length unless something needs escaping: the agent keeps each text until it
        // is written, with shared state for as long as it runs, and a rounded-up guess left 32
        // bytes unused in each (3 MB at 100,000).
        out.reserveCapacity(unescapedLength)
        var first = true
        func key(_ name: StaticString) {
            if !first { out.append(",") }
            first = false
            out.append("\"")
            out.append(name.description)
            out.append("\":")
        }
        if let body {
            key("body")
            JSONText.append(body, to: &out)
        }
        key("headers")
        out.append("[")
        for (index, header) in headers.enumerated() {
            out.append(index == 0 ? "{\"name\":" : ",{\"name\":")
            JSONText.append(header.name, to: &out)
            out.append(",\"value\":")
            JSONText.append(header.value, to: &out)
            out.append("}")
        }
        out.append("]")
        key("method")
        JSONText.append(method, to: &out)
        if let password {
            key("password")
            JSONText.append(password, to: &out)
        }
        if let timeoutMilliseconds {
            key("timeoutMilliseconds")
            out.append(String(timeoutMilliseconds))
        }
        key("url")
        JSONText.append(url, to: &out)
        if let username {
            key("username")
            JSONText.append(username, to: &out)
        }
        out.append("}")
        return out
    }

    /// The length of ``text`` when no value needs escaping.
    var unescapedLength: Int {
        // `{`, `"headers":[`, `]`, `,"method":`, `,"url":`, `}`, and the quotes of method and url.
        var length = 1 + 11 + 1 + 10 + 7 + 1 + 4 + method.utf8.count + url.utf8.count
        // `{"name":`, `,"value":`, `}` and four quotes, and a comma between two.
        for header in headers { length += 22 + header.name.utf8.count + header.value.utf8.count }
        length += max(headers.count - 1, 0)
        if let body { length += 10 + body.utf8.count }  // `"body":`, two quotes and a comma
        if let password { length += 14 + password.utf8.count }  // `,"password":` and two quotes
        if let username { length += 14 + username.utf8.count }
        if let timeoutMilliseconds { length += 23 + String(timeoutMilliseconds).utf8.count }  // `,"timeoutMilliseconds":`
        return length
    }

    /// Reads the JSON text of a state record; nil when it is not one (a newer or damaged record).
    public init?(text: String) {
        guard let decoded = try? JSONDecoder().decode(StoredRequest.self, from: Data(text.utf8)) else { return nil }
        self = decoded
    }

    /// The removal request of `account`, ready to plan.
    public func rendered(account: String) -> RenderedRequest {
        let credentials = username.map { RenderedRequest.Credentials(username: $0, password: password ?? "") }
        return RenderedRequest(account: account, reporter: Reporter.accountRemovalReporter.rawValue, method: method, url: url,
                               headers: headers.map { (name: $0.name, value: $0.value) }, body: body,
                               credentials: credentials, timeout: timeoutMilliseconds.map { .milliseconds($0) })
    }
}
