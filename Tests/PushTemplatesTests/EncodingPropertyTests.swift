import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import PushTemplates
import PushTestSupport
import Testing
import PushTestThreads

/// Decoding what a position's encoding produced must give the value back exactly, and the
/// structure around the value (separators, other fields) must never change.
@Suite("Encoding round-trips for random Unicode values", .blockingThreads)
struct EncodingPropertyTests {
    static let specials: [Unicode.Scalar] = ["&", "=", "+", "%", "#", "/", "?", "\"", "\\", "<", ">", "'", "\r", "\n",
                                             "\t", " ", ":", "@", ",", ")", "]", "{", "}", "\u{1F600}", "\u{00E9}",
                                             "\u{4E2D}", "\u{0301}", "\u{FEFF}", "\u{10FFFF}"]

    /// A random string of specials, ASCII and scalars from every plane (no surrogates).
    static func randomValue(_ rng: inout SeededGenerator, allowControls: Bool) -> String {
        var scalars = String.UnicodeScalarView()
        for _ in 0..<Int.random(in: 0...24, using: &rng) {
            switch Int.random(in: 0..<4, using: &rng) {
            case 0: scalars.append(specials.randomElement(using: &rng)!)
            case 1: scalars.append(Unicode.Scalar(UInt8.random(in: 0x20...0x7E, using: &rng)))
            case 2:
                let value = UInt32.random(in: 0x80...0x10FFFF, using: &rng)
                if let scalar = Unicode.Scalar(value), value != 0xFFFE, value != 0xFFFF { scalars.append(scalar) }
            default:
                if allowControls { scalars.append(Unicode.Scalar(UInt8.random(in: 0...0x1F, using: &rng))) }
                else { scalars.append("\n") }
            }
        }
        return String(scalars)
    }

    static func percentDecode(_ text: Substring, plusIsSpace: Bool) -> String? {
        var bytes = [UInt8]()
        var iterator = Array(text.utf8).makeIterator()
        while let b = iterator.next() {
            if b == UInt8(ascii: "%") {
                guard let h = iterator.next(), let l = iterator.next(),
                      let value = UInt8(String(decoding: [h, l], as: UTF8.self), radix: 16) else { return nil }
                bytes.append(value)
            } else if plusIsSpace && b == UInt8(ascii: "+") {
                bytes.append(UInt8(ascii: " "))
            } else {
                bytes.append(b)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    @Test("URL query, URL path and form body")
    func urlAndForm() throws {
        var rng = SeededGenerator(seed: 0xC0FFEE)
        for _ in 0..<2000 {
            let a = Self.randomValue(&rng, allowControls: true)
            let b = Self.randomValue(&rng, allowControls: true)
            let values = ["pushToken": a, "selector": b]

            let url = try render("https://h.example/x/%pushToken%/y?p=%pushToken%&q=%selector%#f", kind: .url, values)
            let (beforeQuery, query) = try #require(Self.split(url, at: "?"))
            #expect(beforeQuery.split(separator: "/", omittingEmptySubsequences: false).count == 6)
            let segments = beforeQuery.split(separator: "/", omittingEmptySubsequences: false)
            #expect(Self.percentDecode(segments[4], plusIsSpace: false) == a)
            let (queryPart, fragment) = try #require(Self.split(String(query), at: "#"))
            #expect(fragment == "f")
            let pairs = queryPart.split(separator: "&", omittingEmptySubsequences: false)
            #expect(pairs.count == 2)
            #expect(pairs[0].hasPrefix("p=") && pairs[1].hasPrefix("q="))
            #expect(Self.percentDecode(pairs[0].dropFirst(2), plusIsSpace: false) == a)
            #expect(Self.percentDecode(pairs[1].dropFirst(2), plusIsSpace: false) == b)

            let form = try render("p=%pushToken%&q=%selector%", kind: .body(.form), values)
            let fields = form.split(separator: "&", omittingEmptySubsequences: false)
            #expect(fields.count == 2)
            #expect(Self.percentDecode(fields[0].dropFirst(2), plusIsSpace: true) == a)
            #expect(Self.percentDecode(fields[1].dropFirst(2), plusIsSpace: true) == b)
        }
    }

    @Test("JSON body, inside and outside strings")
    func json() throws {
        var rng = SeededGenerator(seed: 42)
        for _ in 0..<2000 {
            let a = Self.randomValue(&rng, allowControls: true)
            let body = try render(#"{"in": "<%pushToken%>", "out": %pushToken%, "n": 1}"#, kind: .body(.json), ["pushToken": a])
            let object = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
            #expect(object.count == 3)
            #expect(object["in"] as? String == "<" + a + ">")
            #expect(object["out"] as? String == a)
            #expect(object["n"] as? Int == 1)
        }
    }

    @Test("XML body, in an attribute and in text")
    func xml() throws {
        var rng = SeededGenerator(seed: 7)
        for _ in 0..<1000 {
            let a = Self.randomValue(&rng, allowControls: false)
            let body = try render(#"<r a="%pushToken%"><t>%pushToken%</t><u/></r>"#, kind: .body(.xml), ["pushToken": a])
            let collector = XMLCollector()
            let parser = XMLParser(data: Data(body.utf8))
            parser.delegate = collector
            #expect(parser.parse(), "\(body)")
            #expect(collector.elements == ["r", "t", "u"])
            #expect(collector.attribute == a)
            #expect(collector.text == a)
        }
    }

    static func split(_ text: String, at separator: Character) -> (Substring, Substring)? {
        guard let index = text.firstIndex(of: separator) else { return nil }
        return (text[..<index], text[text.index(after: index)...])
    }
}

final class XMLCollector: NSObject, XMLParserDelegate {
    var elements: [String] = []
    var attribute: String?
    var text = ""

    func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
                qualifiedName qName: String?, attributes attributeDict: [String: String] = [:]) {
        elements.append(elementName)
        if elementName == "r" { attribute = attributeDict["a"] }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        if elements.last == "t" { text += string }
    }
}
