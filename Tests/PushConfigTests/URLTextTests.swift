import PushConfig
import Testing

@Suite struct URLTextTests {
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
}
