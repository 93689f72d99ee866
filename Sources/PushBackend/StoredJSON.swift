import FoundationEssentials

/// JSON a backend keeps in state (a cleanup, what a delivery keeps): keys sorted, so the same
/// value is always the same text (a cleanup's text is compared to tell one from another).
public enum StoredJSON {
    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// `value` as compact JSON with sorted keys; empty when it cannot be encoded.
    public static func encode(_ value: some Encodable) -> String {
        (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? ""
    }

    /// `text` decoded as `type`, when it mentions `backend` (texts of other backends are passed
    /// over without parsing) and parses; else nil.
    public static func decode<T: Decodable>(_ type: T.Type, from text: String, backend: String) -> T? {
        guard text.contains(backend) else { return nil }
        return try? JSONDecoder().decode(type, from: Data(text.utf8))
    }
}
