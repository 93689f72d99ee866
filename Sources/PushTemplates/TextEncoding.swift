/// The template engine's encoders (SPEC §3), for text a backend writes itself rather than
/// through a template: the same rules, so a value never changes the structure around it.
public enum TextEncoding {
    /// For a URL path segment: every byte outside RFC 3986 unreserved is percent-encoded (`/` too).
    public static func pathSegment(_ text: String) -> String {
        encoded(text, as: .urlPath)
    }

    /// For a URL query value: unreserved, `:` and `@` stay; every other byte is percent-encoded.
    public static func queryValue(_ text: String) -> String {
        encoded(text, as: .urlQuery)
    }

    /// For an `application/x-www-form-urlencoded` value: space is `+`, alphanumerics and `*-._` stay.
    public static func formValue(_ text: String) -> String {
        encoded(text, as: .form)
    }

    private static func encoded(_ text: String, as encoding: Encoding) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        // Percent-encodings cannot fail.
        try? Escaper.append(text, as: encoding, to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
