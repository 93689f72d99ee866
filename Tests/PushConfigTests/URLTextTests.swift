import PushConfig
import PushTemplates
import Testing
import PushTestThreads

@Suite(.blockingThreads) struct URLTextTests {
    @Test(arguments: [
        ("https://push.example.com/v1/token", "push.example.com:443"),
        ("http://Push.Example.com?x=1", "push.example.com:80"),
        ("http://127.0.0.1:8080/x", "127.0.0.1:8080"),
        ("https://user:pw@host.example:8443/#f", "host.example:8443"),
        ("http://[::1]/x", "[::1]:80"),
        ("http://[::1]:9000/x", "[::1]:9000"),
    ])
    func host(_ url: String, _ expected: String) {
        #expect(URLText.hostAndPort(of: url) == expected)
    }

    @Test("what libcurl refuses in any URL rendered from a template's text, and where",
          arguments: [
              ("http://h/a b", 10, URLText.LiteralProblem.unsendable("a space")),
              ("http://h /x", 8, .unsendableInHost("a space")),
              ("http://h/x?a=\tb", 13, .unsendable("a tab")),
              ("http://h/\u{7F}", 9, .unsendable("a control character")),
              ("http://h:99999/x", 9, .portOutOfRange("99999")),
              ("http://h:0", 9, .portOutOfRange("0")),
              ("http://u:p@h:80x/x", 13, .portNotANumber("80x")),
              ("http://[::1]:65536", 13, .portOutOfRange("65536")),
              ("http://h/a\nb", 10, .unsendable("a line break")),
              ("http://h/%hmac_sha256(%account[u]%,a b)% c", 40, .unsendable("a space")),
          ] as [(String, Int, URLText.LiteralProblem)])
    func literalProblem(_ text: String, offset: Int, problem: URLText.LiteralProblem) throws {
        let found = try #require(Self.literalProblem(in: text))
        #expect(found.offset == offset && found.problem == problem)
    }

    @Test(arguments: ["http://h:65535/x", "http://u:p@h/x", "http://[::1]:8080/", "http://h:%port%/x",
                      "http://h/?q=%selector%&t=%pushTokenOther%", "http://h:/x",
                      // Spaces inside placeholders are the template's, not the URL's.
                      "https://h/sig?s=%hmac_sha256(%account[username]%,hello world)%", "https://h/%sha256(a b)%",
                      "https://h/r?%account[home region]%", "https://h/100%%?x=%selector%"])
    func nothingLibcurlRefuses(_ text: String) {
        #expect(Self.literalProblem(in: text) == nil)
    }

    /// ``URLText/literalProblem(in:placeholders:)`` with the placeholders the template compiler
    /// finds in `text` (as a plain template: the URL kind refuses `%port%` before this is asked).
    static func literalProblem(in text: String) -> (offset: Int, problem: URLText.LiteralProblem)? {
        var scope = AnyName()
        let spans = Template.compile(text, kind: .plain, scope: &scope).template?.placeholderSpans
        #expect(spans != nil, "\(text) compiles")
        return URLText.literalProblem(in: text, placeholders: spans ?? [])
    }

    /// Every name is a variable, with or without a key.
    struct AnyName: TemplateScope {
        var slots: [String: Int] = [:]
        mutating func slot(forVariable name: String) -> Int? { slot(name) }
        mutating func slot(forVariable name: String, key: String) -> Int? { slot(name + "[" + key + "]") }
        private mutating func slot(_ name: String) -> Int {
            if let slot = slots[name] { return slot }
            slots[name] = slots.count
            return slots.count - 1
        }
        var variableNames: [String] { [] }
        var keyedVariableNames: [String] { [] }
    }

    @Test func aPortWithASignIsNotANumber() {
        #expect(Self.literalProblem(in: "https://h:+80/x")?.problem.message == "has '+80' where the port goes, which is not a number")
    }

    @Test func anEndpointWithASpaceOrABadPortIsRefused() {
        #expect(URLText.endpointProblem("https://prov example.com") == "must be a URL without a space")
        #expect(URLText.endpointProblem("https://h.example:70000") == "must have a port from 1 to 65535")
        #expect(URLText.endpointProblem("https://h.example:8443") == nil)
    }
}

/// The byte-level readers and the cache answer as the straightforward reading of the text does.
@Suite(.blockingThreads) struct URLTextReadingTests {
    @Test(arguments: [
        ("HTTPS://Push.Example.COM/x", "https", "push.example.com", 443),
        ("http://127.0.0.1", "http", "127.0.0.1", 80),
        ("http://h:notaport/x", "http", "h", 80),
        ("https://u@[::1]:8443?q", "https", "::1", 8443),
        ("http://ÉXAMPLE.test/", "http", "éxample.test", 80),
    ])
    func target(_ url: String, _ scheme: String, _ host: String, _ port: Int) throws {
        let target = try #require(URLText.target(of: url))
        #expect(target.scheme == scheme && target.host == host && target.port == port)
    }

    @Test(arguments: ["", "http:/x", "http://", "http:///path", "no scheme", "http://user@/x"])
    func noTarget(_ url: String) {
        #expect(URLText.target(of: url) == nil)
    }

    @Test(arguments: [
        ("localhost", true), ("api.localhost", true), ("::1", true), ("127.0.0.1", true), ("127.255.0.9", true),
        ("127.0.0.256", false), ("0127.0.0.1", false), ("127.0.0", false), ("127.0.0.1.", false), ("127..0.1", false),
        ("128.0.0.1", false), ("127.0.0.+1", true), ("prov.example.com", false), ("10.0.0.1", false),
    ])
    func loopback(_ host: String, _ expected: Bool) {
        #expect(URLText.isLoopback(host) == expected)
    }

    @Test func theCacheAnswersAnotherPathOfTheSameHostAsItsFirstReading() {
        var cache = URLTargetCache()
        let first = cache.hostAndPort(of: "https://Push.Example.com/v1/a")
        #expect(first == "push.example.com:443")
        #expect(cache.hostAndPort(of: "https://Push.Example.com?b") == first)
        #expect(cache.hostAndPort(of: "https://Push.Example.com") == first)
        // A longer authority that begins like the cached one is another host.
        #expect(cache.hostAndPort(of: "https://Push.Example.com.evil:8443/") == "push.example.com.evil:8443")
        #expect(cache.target(of: "http://127.0.0.1:9/x")?.isLoopback == true)
        #expect(cache.target(of: "not a url") == nil)
        #expect(cache.hostAndPort(of: "not a url") == "not a url")
    }

    @Test("the cache answers for each of the hosts read in turns, and for one it let go")
    func hostsInTurns() {
        var cache = URLTargetCache()
        let hosts = (1...URLTargetCache.kept + 1).map { "h\($0).example" }
        for round in 0..<2 {
            for (index, host) in hosts.enumerated() {
                #expect(cache.hostAndPort(of: "https://\(host):\(8000 + index)/r\(round)") == "\(host):\(8000 + index)")
                #expect(cache.target(of: "http://\(host)/x")?.port == 80)
            }
        }
    }
}
