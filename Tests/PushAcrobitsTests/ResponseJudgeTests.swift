@testable import PushAcrobits
import PushScheduler
import PushTransport
import Testing
import PushTestThreads

/// SPEC §4's success rule, one case per line of it.
@Suite(.blockingThreads) struct ResponseJudgeTests {
    static func judge(_ status: Int, _ contentType: String? = nil, _ body: String = "", truncated: Bool = false,
                      headers: [(name: String, value: String)] = []) -> AttemptResult {
        var all = headers
        if let contentType { all.append(("Content-Type", contentType)) }
        return ResponseJudge.judge(TransportResponse(status: status, headers: all, body: Array(body.utf8), bodyTruncated: truncated))
    }

    static func reason(_ result: AttemptResult) -> String? {
        if case .failed(let failure) = result { return failure.reason }
        return nil
    }

    @Test func twoHundredsWithoutContentTypeAreDelivered() {
        #expect(Self.reason(Self.judge(200)) == nil)
        #expect(Self.reason(Self.judge(204)) == nil)
        #expect(Self.reason(Self.judge(200, nil, "anything at all")) == nil)
        #expect(Self.reason(Self.judge(201, "text/plain", "")) == nil)
    }

    @Test func jsonNeedsABodyThatParses() {
        #expect(Self.reason(Self.judge(200, "application/json", "{}")) == nil)
        #expect(Self.reason(Self.judge(200, "application/json; charset=utf-8", " [1, {\"a\": null}] ")) == nil)
        #expect(Self.reason(Self.judge(200, "application/problem+json", "{\"x\":1}")) == nil)
        #expect(Self.reason(Self.judge(200, "application/json", "")) == "HTTP 200, but the body is empty while Content-Type says JSON")
        #expect(Self.reason(Self.judge(200, "Application/JSON", "  \n")) == "HTTP 200, but the body is empty while Content-Type says JSON")
        #expect(Self.reason(Self.judge(200, "application/json", "<html>")) == "HTTP 200, but the body is not valid JSON (unexpected character at byte 1)")
        #expect(Self.reason(Self.judge(200, " application/json ;charset=utf-8", "")) == "HTTP 200, but the body is empty while Content-Type says JSON")
        // Only the JSON types of SPEC §3, the ones a request body is encoded for.
        #expect(Self.reason(Self.judge(200, "text/json", "")) == nil)
    }

    @Test func xmlNeedsAWellFormedBody() {
        #expect(Self.reason(Self.judge(200, "text/xml", "<?xml version=\"1.0\"?><ok a='1'>yes &amp; <b/></ok>")) == nil)
        #expect(Self.reason(Self.judge(200, "application/xml", "<ok>")) == "HTTP 200, but the body is not well-formed XML (the document ends inside an element at byte 5)")
        #expect(Self.reason(Self.judge(200, "application/atom+xml", "")) == "HTTP 200, but the body is empty while Content-Type says XML")
    }

    @Test func aTruncatedBodyIsJudgedByHowItStarts() {
        #expect(Self.reason(Self.judge(200, "application/json", "{\"long\": [1, 2", truncated: true)) == nil)
        #expect(Self.reason(Self.judge(200, "application/json", "<html>", truncated: true)) == "HTTP 200, but the body does not start like JSON")
        #expect(Self.reason(Self.judge(200, "text/xml", "<a><b>", truncated: true)) == nil)
    }

    @Test func aHEADOrA204CarriesNoBodyWhateverItsType() {
        let head = ResponseJudge.judge(TransportResponse(status: 200, headers: [("Content-Type", "application/json")]), method: "HEAD")
        #expect(Self.reason(head) == nil)
        #expect(Self.reason(Self.judge(204, "application/json", "")) == nil)
        let get = ResponseJudge.judge(TransportResponse(status: 200, headers: [("Content-Type", "application/json")]), method: "GET")
        #expect(Self.reason(get) == "HTTP 200, but the body is empty while Content-Type says JSON")
    }

    @Test func everythingElseIsAFailure() {
        #expect(Self.reason(Self.judge(500)) == "HTTP 500")
        #expect(Self.reason(Self.judge(404, "application/json", "{}")) == "HTTP 404")
        #expect(Self.reason(Self.judge(301)) == "HTTP 301")
        #expect(Self.reason(Self.judge(100)) == "HTTP 100")
    }

    @Test func retryAfterIsReadFrom429And503Only() {
        func failure(_ status: Int, _ value: String) -> AttemptFailure? {
            if case .failed(let failure) = Self.judge(status, headers: [("Retry-After", value)]) { return failure }
            return nil
        }
        #expect(failure(503, "120")?.retryAfter == .seconds(120))
        #expect(failure(429, "Sun, 06 Nov 1994 08:49:37 GMT")?.retryAfter == .date(epochSeconds: 784_111_777))
        #expect(failure(500, "120")?.retryAfter == nil)
        #expect(failure(503, "soon")?.retryAfter == nil)
        #expect(failure(503, "120")?.status == 503)
    }
}

@Suite(.blockingThreads) struct XMLCheckerTests {
    @Test(arguments: [
        "<a/>",
        "\u{FEFF}<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- c --><a x=\"1\" y='2'><b>t&lt;&#x41;&#65;</b><![CDATA[<raw>]]><?pi x?></a>\n",
        "<!DOCTYPE a [<!ENTITY e \"x\">]><a>&e;</a>",
        "<ns:a xmlns:ns=\"u\"><ns:b/></ns:a>",
    ])
    func wellFormed(_ text: String) {
        #expect(XMLChecker.problem(in: Array(text.utf8)) == nil)
    }

    @Test(arguments: [
        ("", "no root element at byte 1"),
        ("text", "text outside the root element at byte 1"),
        ("<a></b>", "a closing tag that matches no open element at byte 8"),
        ("<a/><b/>", "a second root element at byte 5"),
        ("<a x=1/>", "an attribute value must be quoted at byte 6"),
        ("<a x='1' x='2'/>", "a repeated attribute at byte 11"),
        ("<a>&bad</a>", "';' expected after a reference at byte 8"),
        ("<a><!-- x -- y --></a>", "'--' inside a comment at byte 11"),
        ("<![CDATA[x]]>", "a start tag was expected at byte 1"),
        ("<a>]]></a>", "']]>' in text at byte 4"),
    ])
    func notWellFormed(_ text: String, _ problem: String) {
        #expect(XMLChecker.problem(in: Array(text.utf8)) == problem)
    }
}
