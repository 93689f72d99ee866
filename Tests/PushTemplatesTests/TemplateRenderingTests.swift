import PushTemplates
import Testing
import PushTestThreads

@Suite("Rendering: the Acrobits examples and each position's encoding", .blockingThreads)
struct TemplateRenderingTests {
    @Test("the Acrobits GET example renders byte for byte")
    func acrobitsGet() throws {
        let url = try render(
            "https://example.com/token/?username=%account[username]%&password=%account[password]%&selector=%selector%&token_msgs=%pushTokenOther%&appid_msgs=%pushappid_other%&token_calls=%pushTokenIncomingCall%&appid_calls=%pushappid_incoming_call%",
            kind: .url, acrobitsValues)
        #expect(url == "https://example.com/token/?username=johndow&password=12345678&selector=12869E0E6E553673C54F29105A0647204C416A2A:7C3A0D14&token_msgs=QVBBOTFiRzlhcVd2bW54bllCWldHOWh4dnRrZ3pUWFNvcGZpdWZ6bWM2dFAzS2J&appid_msgs=com.cloudsoftphone.app&token_calls=Udl99X2JFP1bWwS5gR%2FwGeLE1hmAB2CMpr1Ej0wxkrY%3D&appid_calls=com.cloudsoftphone.app.pushkit")
    }

    @Test("the Acrobits path example percent-encodes every reserved byte of a path value")
    func acrobitsPath() throws {
        let url = try render("https://example.com/pushToken/%account[username]%/%selector%/%pushToken%&appid=%pushappid%",
                             kind: .url, acrobitsValues)
        #expect(url == "https://example.com/pushToken/johndow/12869E0E6E553673C54F29105A0647204C416A2A%3A7C3A0D14/QVBBOTFiRzlhcVd2bW54bllCWldHOWh4dnRrZ3pUWFNvcGZpdWZ6bWM2dFAzS2J&appid=com.cloudsoftphone.app")
    }

    @Test("the Acrobits JSON POST example carries the raw token")
    func acrobitsJSON() throws {
        let body = try render(
            #"{ "username" : "%account[username]%", "token_calls" : "%pushTokenIncomingCall%", "token_msgs" : "%pushTokenOther%", "selector" : "%selector%", "appId_calls": "%pushappid_incoming_call%", "appId_msgs" : "%pushappid_other%" }"#,
            kind: .body(.json), acrobitsValues)
        #expect(body == #"{ "username" : "johndow", "token_calls" : "Udl99X2JFP1bWwS5gR/wGeLE1hmAB2CMpr1Ej0wxkrY=", "token_msgs" : "QVBBOTFiRzlhcVd2bW54bllCWldHOWh4dnRrZ3pUWFNvcGZpdWZ6bWM2dFAzS2J", "selector" : "12869E0E6E553673C54F29105A0647204C416A2A:7C3A0D14", "appId_calls": "com.cloudsoftphone.app.pushkit", "appId_msgs" : "com.cloudsoftphone.app" }"#)
    }

    @Test("the Acrobits form POST example")
    func acrobitsForm() throws {
        let body = try render(
            "username=%account[username]%&selector=%selector%&token_calls=%pushTokenIncomingCall%&appid_calls=%pushappid_incoming_call%&token_msgs=%pushTokenOther%&appid_msgs=%pushappid_other%",
            kind: .body(.form), acrobitsValues)
        #expect(body == "username=johndow&selector=12869E0E6E553673C54F29105A0647204C416A2A%3A7C3A0D14&token_calls=Udl99X2JFP1bWwS5gR%2FwGeLE1hmAB2CMpr1Ej0wxkrY%3D&appid_calls=com.cloudsoftphone.app.pushkit&token_msgs=QVBBOTFiRzlhcVd2bW54bllCWldHOWh4dnRrZ3pUWFNvcGZpdWZ6bWM2dFAzS2J&appid_msgs=com.cloudsoftphone.app")
    }

    static let tricky = "a b&c=d+e%f#g/h?i:j@k~l\"m\\n<o>'p\u{00E9}\u{1F600}"

    @Test("URL path: everything outside unreserved is percent-encoded, '/' included")
    func urlPath() throws {
        #expect(try render("https://h.example/x/%v%/y", kind: .url, ["v": Self.tricky])
            == "https://h.example/x/a%20b%26c%3Dd%2Be%25f%23g%2Fh%3Fi%3Aj%40k~l%22m%5Cn%3Co%3E%27p%C3%A9%F0%9F%98%80/y")
    }

    @Test("URL query: unreserved, ':' and '@' stay")
    func urlQuery() throws {
        #expect(try render("https://h.example/?v=%v%#top", kind: .url, ["v": Self.tricky])
            == "https://h.example/?v=a%20b%26c%3Dd%2Be%25f%23g%2Fh%3Fi:j@k~l%22m%5Cn%3Co%3E%27p%C3%A9%F0%9F%98%80#top")
    }

    @Test("a query with no path still counts as a query")
    func queryWithoutPath() throws {
        #expect(try render("https://h.example?v=%v%", kind: .url, ["v": "a:b/c"]) == "https://h.example?v=a:b%2Fc")
    }

    @Test("form body: space is '+', '+' is %2B, only alphanumerics and *-._ stay")
    func form() throws {
        #expect(try render("v=%v%", kind: .body(.form), ["v": Self.tricky + "*-._"])
            == "v=a+b%26c%3Dd%2Be%25f%23g%2Fh%3Fi%3Aj%40k%7El%22m%5Cn%3Co%3E%27p%C3%A9%F0%9F%98%80*-._")
    }

    @Test("JSON: escaped inside a string, a quoted string outside one")
    func json() throws {
        let values = ["v": "q\"b\\s/\n\r\t\u{01}\u{1F600}"]
        #expect(try render(#"{"a":"x%v%y","b":%v%}"#, kind: .body(.json), values)
            == #"{"a":"xq\"b\\s/\n\r\t\u0001😀y","b":"q\"b\\s/\n\r\t\u0001😀"}"#)
    }

    @Test("JSON: U+FEFF, U+2028 and U+2029 are written as escapes (found by the property test)")
    func jsonInvisibles() throws {
        #expect(try render(#"["%v%"]"#, kind: .body(.json), ["v": "a\u{FEFF}b\u{2028}c\u{2029}d"]) == #"["a\ufeffb\u2028c\u2029d"]"#)
    }

    @Test("JSON: an escaped quote in the literal text does not end the string")
    func jsonEscapedQuote() throws {
        #expect(try render(#"{"a":"say \"%v%\""}"#, kind: .body(.json), ["v": "hi"]) == #"{"a":"say \"hi\""}"#)
    }

    @Test("XML: markup characters and line breaks become references")
    func xml() throws {
        #expect(try render("<r a=\"%v%\">%v%</r>", kind: .body(.xml), ["v": "<&>\"'\r\n\t"])
            == "<r a=\"&lt;&amp;&gt;&quot;&apos;&#13;&#10;&#9;\">&lt;&amp;&gt;&quot;&apos;&#13;&#10;&#9;</r>")
    }

    @Test("XML: a character XML cannot carry is a render error, not a silent change")
    func xmlForbidden() {
        #expect(throws: RenderError.self) { try render("<r>%v%</r>", kind: .body(.xml), ["v": "a\u{01}b"]) }
    }

    @Test("raw body and plain text insert values as they are")
    func raw() throws {
        #expect(try render("v=%v%", kind: .body(.raw), ["v": "a&b c"]) == "v=a&b c")
        #expect(try render("%v%", kind: .plain, ["v": "a&b c"]) == "a&b c")
    }

    @Test("header values are raw, but CR, LF and NUL are rejected")
    func header() throws {
        #expect(try render("Bearer %v%", kind: .headerValue, ["v": "a&b c"]) == "Bearer a&b c")
        for bad in ["a\rb", "a\nb", "a\u{0}b"] {
            #expect(throws: RenderError.self) { try render("Bearer %v%", kind: .headerValue, ["v": bad]) }
            #expect(throws: RenderError.self) { try render("Bearer %raw(%v%)%", kind: .headerValue, ["v": bad]) }
        }
    }

    @Test("a missing value renders as empty text")
    func missing() throws {
        #expect(try render("https://h.example/?t=%pushTokenOther%&u=%account[username]%", kind: .url) == "https://h.example/?t=&u=")
    }
}

@Suite("Grammar: literals, %% and percent-escapes", .blockingThreads)
struct TemplateGrammarTests {
    @Test("%% is a literal percent sign")
    func doublePercent() throws {
        #expect(try render("100%% of %v%%%", ["v": "x"]) == "100% of x%")
    }

    @Test("a % that begins no placeholder stays, so %2F and %20 survive")
    func strayPercent() throws {
        #expect(try render("https://h.example/a%2Fb?q=%20x&v=%v%", kind: .url, ["v": "1"]) == "https://h.example/a%2Fb?q=%20x&v=1")
        #expect(try render("50% off, 5%", ["v": "1"]) == "50% off, 5%")
    }

    @Test("a percent-escape with hex letters (%C3%A9) is not a variable")
    func hexEscape() throws {
        #expect(try render("https://h.example/caf%C3%A9?v=%v%", kind: .url, ["v": "1"]) == "https://h.example/caf%C3%A9?v=1")
        #expect(issues("https://h.example/caf%C3%A9", kind: .url).isEmpty)
    }

    @Test("a placeholder that is not closed is literal, with a warning when it names a known variable")
    func unclosedKnownName() throws {
        #expect(try render("a=%selector&b") == "a=%selector&b")
        let found = issues("a=%selector&b")
        #expect(found == [TemplateIssue(severity: .warning,
                                        message: "'%selector' has no closing '%', so it is sent as literal text",
                                        offset: 2, length: 9)])
        #expect(issues("a=%unknownthing&b").isEmpty)
    }

    @Test("literal text equal to a template's source renders unchanged and is constant")
    func constant() throws {
        var scope = TestScope()
        let template = try #require(Template.compile("https://h.example/x", kind: .url, scope: &scope).template)
        #expect(template.isConstant)
        #expect(try template.render(TestValues(scope: scope, values: [:])) == "https://h.example/x")
    }

    @Test("references list every variable with its offset and length")
    func references() throws {
        var scope = TestScope()
        let template = try #require(Template.compile("a%selector%b%sha1(%account[password]%)%", kind: .plain, scope: &scope).template)
        #expect(template.references.map(\.name) == ["selector", "account"])
        #expect(template.references.map(\.key) == [nil, "password"])
        #expect(template.references.map(\.offset) == [1, 18])
        #expect(template.references.map(\.length) == [10, 19])
    }
}

@Suite("Functions", .blockingThreads)
struct TemplateFunctionTests {
    @Test("hashes give lower-case hex")
    func hashes() throws {
        #expect(try render("%sha1(abc)%") == "a9993e364706816aba3e25717850c26c9cd0d89d")
        #expect(try render("%sha256(abc)%") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(try render("%md5(abc)%") == "900150983cd24fb0d6963f7d28e17f72")
        #expect(try render("%hmac_sha256(key,The quick brown fox jumps over the lazy dog)%")
            == "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8")
    }

    @Test("nested calls: %sha1(%account[password]%)%")
    func nested() throws {
        #expect(try render("%sha1(%account[password]%)%", acrobitsValues) == "7c222fb2927d828af22f592134e8932480637c0d")
        #expect(try render("%upper(%sha1(%account[password]%)%)%", acrobitsValues) == "7C222FB2927D828AF22F592134E8932480637C0D")
    }

    @Test("arguments mix literal text and placeholders")
    func mixedArguments() throws {
        #expect(try render("%md5(%account[username]%:%account[password]%)%", acrobitsValues)
            == "3809e1e95a29809de0f971bf18c3e4e8")
    }

    @Test("base64, upper, lower, trim")
    func textFunctions() throws {
        #expect(try render("%base64(%v%)%", ["v": "héllo wörld"]) == "aMOpbGxvIHfDtnJsZA==")
        #expect(try render("%base64(ab)%") == "YWI=")
        #expect(try render("%base64()%") == "")
        #expect(try render("%upper(%v%)%", ["v": "abc-é"]) == "ABC-É")
        #expect(try render("%lower(%v%)%", ["v": "ABC-É"]) == "abc-é")
        #expect(try render("[%trim(%v%)%]", ["v": " \t a b \n"]) == "[a b]")
        #expect(try render("[%trim(%v%)%]", ["v": "  "]) == "[]")
    }

    @Test("default(value, fallback) takes the fallback only for empty text")
    func defaultFunction() throws {
        #expect(try render("%default(%pushTokenOther%,none)%") == "none")
        #expect(try render("%default(%pushTokenOther%,none)%", ["pushTokenOther": "tok"]) == "tok")
    }

    @Test("a ')' that does not close the call and a '%' before it stay in the argument")
    func parenthesesInArguments() throws {
        #expect(try render("%upper(f(x))%") == "F(X)")
        #expect(try render("%default(%v%,100%)%") == "100%")
    }

    @Test("encoding overrides replace the position's encoding")
    func overrides() throws {
        #expect(try render("https://h.example/?a=%raw(%v%)%&b=%v%", kind: .url, ["v": "x/y"]) == "https://h.example/?a=x/y&b=x%2Fy")
        #expect(try render("v=%urlencode(%v%)%", kind: .plain, ["v": "a b:/"]) == "v=a%20b%3A%2F")
        #expect(try render("{\"a\": %raw(%v%)%}", kind: .body(.json), ["v": "3"]) == "{\"a\": 3}")
        #expect(try render("[%json(%v%)%]", kind: .plain, ["v": "a\"b"]) == "[a\\\"b]")
        #expect(try render("[%xml(%v%)%]", kind: .plain, ["v": "a<b"]) == "[a&lt;b]")
    }
}

@Suite("Secrets", .blockingThreads)
struct TemplateSecretTests {
    @Test("a secret, and a value derived from one, are masked; other values are not")
    func masked() throws {
        let out = try render("https://h.example/?u=%account[username]%&p=%account[password]%&h=%sha1(%account[password]%)%",
                             kind: .url, acrobitsValues, secrets: ["account[password]"], masking: .stars)
        #expect(out == "https://h.example/?u=johndow&p=********&h=********")
    }

    @Test("a masked secret outside a JSON string is still a JSON string, so the body stays JSON")
    func maskedInJSON() throws {
        let out = try render(#"{"p": %account[password]%, "h": %md5(%account[password]%)%, "q": "%account[password]%"}"#,
                             kind: .body(.json), acrobitsValues, secrets: ["account[password]"], masking: .stars)
        #expect(out == #"{"p": "********", "h": "********", "q": "********"}"#)
    }

    @Test("a replacement can name the secret's slot")
    func namedReplacement() throws {
        let out = try render("p=%account[password]%", kind: .body(.form), acrobitsValues, secrets: ["account[password]"],
                             masking: .replace { slot in slot == nil ? "derived" : "$SECRET" })
        #expect(out == "p=$SECRET")
    }

    @Test("revealed secrets are encoded like any value")
    func revealed() throws {
        #expect(try render("p=%v%", kind: .body(.form), ["v": "a b"], secrets: ["v"]) == "p=a+b")
    }
}
