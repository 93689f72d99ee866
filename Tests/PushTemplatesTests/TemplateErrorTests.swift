import PushTemplates
import Testing
import PushTestThreads

@Suite("Compile errors carry the placeholder's offset and a suggestion", .blockingThreads)
struct TemplateErrorTests {
    func only(_ source: String, kind: TemplateKind = .plain) -> TemplateIssue? {
        let found = issues(source, kind: kind)
        return found.count == 1 ? found[0] : nil
    }

    @Test("unknown variable, with the nearest name")
    func unknownVariable() throws {
        let issue = try #require(only("x=%pushTokenOthr%"))
        #expect(issue == TemplateIssue(severity: .error, message: "unknown variable 'pushTokenOthr'; did you mean 'pushTokenOther'?",
                                       offset: 2, length: 15))
    }

    @Test("unknown variable far from every name has no suggestion")
    func unknownVariableNoSuggestion() throws {
        #expect(try #require(only("%zzzzzzzzzz%")).message == "unknown variable 'zzzzzzzzzz'")
    }

    @Test("unknown function, with the nearest name")
    func unknownFunction() throws {
        let issue = try #require(only("a %sha(%v%)%"))
        #expect(issue.message == "unknown function 'sha'; did you mean 'sha1'?")
        #expect(issue.offset == 2)
        #expect(issue.length == 10)
    }

    @Test("wrong argument count")
    func arity() throws {
        #expect(try #require(only("%hmac_sha256(%v%)%")).message == "hmac_sha256 takes 2 arguments, not 1: hmac_sha256(key,message)")
        #expect(try #require(only("%sha1(a,b)%")).message == "sha1 takes 1 argument, not 2: sha1(value)")
    }

    @Test("unterminated placeholders")
    func unterminated() throws {
        let keyed = try #require(only("u=%account[username&x"))
        #expect(keyed.message == "unterminated placeholder %account[…: expected ']%'")
        #expect(keyed.offset == 2)
        let call = try #require(only("a %sha1(%v%"))
        #expect(call.message == "unterminated placeholder %sha1(…: expected ')%'")
        #expect(call.offset == 2)
    }

    @Test("a placeholder in the URL's scheme, host or fragment")
    func urlPositions() throws {
        #expect(try #require(only("%v%://h.example/", kind: .url)).message
            == "a placeholder cannot stand in a URL's scheme or host; only the path and the query can hold values")
        let host = try #require(only("https://%v%.example/", kind: .url))
        #expect(host.offset == 8)
        #expect(try #require(only("https://u:%v%@h.example/", kind: .url)).offset == 10)
        #expect(try #require(only("https://h.example/p#%v%", kind: .url)).message
            == "a placeholder cannot stand in a URL's fragment; only the path and the query can hold values")
        #expect(issues("https://h.example:8080/%v%?a=%v%", kind: .url).isEmpty)
    }

    @Test("functions and variables used as the other")
    func misuse() throws {
        #expect(try #require(only("%sha1%")).message == "'sha1' is a function; call it as %sha1(…)%")
        #expect(try #require(only("%account%")).message == "'account' needs a key, as in %account[username]%")
        #expect(try #require(only("%selector(x)%")).message == "'selector' is a variable, not a function")
        #expect(try #require(only("%selector[x]%")).message == "'selector' takes no key")
        #expect(try #require(only("%acount[x]%")).message == "unknown variable 'acount'; did you mean 'account'?")
        #expect(try #require(only("%account[]%")).message == "%account[]% names no key")
    }

    @Test("a percent-escape followed by a name and a '%' reads as a placeholder; the error says how to keep it")
    func hexEscapeHint() throws {
        #expect(try #require(only("https://h.example/caf%C3%A9s%20x", kind: .url)).message
            == "unknown variable 'A9s'; if %A9 is a percent-escape, write it as %%A9")
        #expect(issues("https://h.example/caf%C3%%A9s%20x", kind: .url).isEmpty)
    }

    @Test("every error is collected, in source order, and no template is produced")
    func collected() {
        var scope = TestScope()
        let result = Template.compile("%nope%-%sha(x)%-%selector%-%alsonope%", kind: .plain, scope: &scope)
        #expect(result.template == nil)
        #expect(result.issues.map(\.offset) == [0, 7, 27])
    }

    @Test("deep nesting is refused, not a stack overflow")
    func depth() {
        let source = String(repeating: "%upper(", count: 40) + "x" + String(repeating: ")%", count: 40)
        #expect(issues(source).contains { $0.message == "functions are nested more than 16 deep" })
    }
}
