import PushConfig
import PushTemplates

/// A test push as `pushreporter payload` renders it (SPEC §9.4, seed 003): the message of a
/// `MESSAGE.yaml`, written as Adobe Campaign Standard sends it to an iOS or an Android app,
/// byte for byte the same every time (keys in a fixed order), and readable by `track`.
///
/// | key | iOS | Android (`data`, every value a string) |
/// | --- | --- | --- |
/// | `title`, `body` | `aps.alert` | `title`, `body` |
/// | `badge` (a whole number) | `aps.badge` (a number) | `badge` |
/// | `sound`, `category` | `aps.sound`, `aps.category` | `sound`, `category` |
/// | `contentAvailable` (true/false) | `aps.content-available: 1` | (iOS only) |
/// | `mediaUrl` | `media-attachment-url`, and `aps.mutable-content: 1` | `media-attachment-url` |
/// | `uri` | `uri` | `uri` |
/// | `deliveryId`, `messageId` | `_dId`, `_mId` | `_dId`, `_mId` |
/// | `tracking` (on/off) | `_acsDeliveryTracking` | `_acsDeliveryTracking` |
/// | `custom` (a mapping) | its keys at the top level | its keys in `data` |
/// | `collapseKey`, `priority` (`high`, the default, or `normal`) | (FCM only) | beside `data` |
public struct TestPushMessage: Sendable {
    /// Where the push goes.
    public enum Platform: String, CaseIterable, Sendable {
        case ios, android
    }

    /// Every key a message may have.
    public static let keys = ["title", "body", "badge", "sound", "category", "contentAvailable", "mediaUrl", "uri",
                              "deliveryId", "messageId", "tracking", "collapseKey", "priority", "custom"]
    /// The payload keys the message's own keys are written to: `custom` may not use them.
    static let reservedKeys: Set<String> = ["aps", "data", "collapseKey", "priority", "title", "body", "badge", "sound",
                                            "category", "media-attachment-url", "uri", "_dId", "_mId", "_acsDeliveryTracking"]

    var texts: [String: String] = [:]
    var badge: Int?
    var contentAvailable = false
    var priority = "high"
    var custom: [(key: String, value: String)] = []
    /// The keys the file gives.
    var given: Set<String> = []

    /// Reads a message file; nil (with `file:line:column` diagnostics) when it has a problem.
    public static func parse(_ bytes: [UInt8], file: String, diagnostics: inout DiagnosticList) -> TestPushMessage? {
        let parsed = YAMLParser.parse(bytes)
        for error in parsed.errors { diagnostics.error(error.message, file: file, at: error.position) }
        guard parsed.errors.isEmpty else { return nil }
        guard case .mapping(let mapping)? = parsed.root else {
            diagnostics.error("a message is a YAML mapping of \(keys.joined(separator: ", "))", file: file, at: parsed.root?.start)
            return nil
        }
        var message = TestPushMessage()
        let errors = diagnostics.errorCount
        for entry in mapping.entries {
            let key = entry.key.value
            guard keys.contains(key) else {
                var text = "unknown key '\(key.displayEscaped)' in a message"
                if let nearest = NameSuggester.nearest(to: key, among: keys) { text += "; did you mean '\(nearest)'?" }
                else { text += " (known: \(keys.joined(separator: ", ")))" }
                diagnostics.error(text, file: file, at: entry.key.start)
                continue
            }
            message.given.insert(key)
            if key == "custom" {
                message.readCustom(entry.value, file: file, diagnostics: &diagnostics)
                continue
            }
            guard let text = scalar(entry.value, key, file: file, diagnostics: &diagnostics) else { continue }
            func invalid(_ why: String) { diagnostics.error("\(key) must be \(why), not '\(text.displayEscaped)'", file: file, at: entry.value.start) }
            switch key {
            case "badge":
                guard let number = Int(text), number >= 0, number <= Int(Int32.max) else { invalid("a whole number, 0 or more"); continue }
                message.badge = number
            case "contentAvailable":
                switch text.lowercased() {
                case "true", "yes", "on", "1": message.contentAvailable = true
                case "false", "no", "off", "0": message.contentAvailable = false
                default: invalid("true or false")
                }
            case "tracking":
                guard ["on", "off"].contains(text.lowercased()) else { invalid("on or off"); continue }
                message.texts[key] = text.lowercased()
            case "priority":
                guard ["high", "normal"].contains(text) else { invalid("high or normal"); continue }
                message.priority = text
            default:
                message.texts[key] = text
            }
        }
        return diagnostics.errorCount == errors ? message : nil
    }

    /// Reads `custom:`, a mapping of single values whose keys the payload does not use itself.
    private mutating func readCustom(_ node: YAMLNode, file: String, diagnostics: inout DiagnosticList) {
        guard case .mapping(let mapping) = node else {
            diagnostics.error("custom must be a mapping of keys to values, not \(node.kindDescription)", file: file, at: node.start)
            return
        }
        for entry in mapping.entries {
            let key = entry.key.value
            if Self.reservedKeys.contains(key) {
                diagnostics.error("custom key '\(key.displayEscaped)' is one the payload writes itself; give it another name",
                                  file: file, at: entry.key.start)
                continue
            }
            if let value = Self.scalar(entry.value, "custom key '\(key.displayEscaped)'", file: file, diagnostics: &diagnostics) {
                custom.append((key, value))
            }
        }
    }

    /// The text of a single untagged value, or nil (with a diagnostic).
    private static func scalar(_ node: YAMLNode, _ what: String, file: String, diagnostics: inout DiagnosticList) -> String? {
        guard case .scalar(let scalar) = node else {
            diagnostics.error("\(what) must be a single value, not \(node.kindDescription)", file: file, at: node.start)
            return nil
        }
        if let tag = scalar.tag, tag != "!", !tag.hasPrefix("!!"), !tag.hasPrefix("tag:yaml.org,2002:") {
            diagnostics.error("\(what) cannot be tagged \(tag) in a message: write the value itself", file: file, at: scalar.start)
            return nil
        }
        return scalar.value
    }

    /// The keys the file gives that `platform`'s payload does not carry, as a sentence; nil when none.
    public func unused(on platform: Platform) -> String? {
        switch platform {
        case .ios:
            let unused = ["collapseKey", "priority"].filter(given.contains)
            guard !unused.isEmpty else { return nil }
            let one = unused.count == 1
            return "\(unused.joined(separator: " and ")) \(one ? "is an FCM option" : "are FCM options") (APNs takes \(one ? "it as a request header" : "them as request headers")), so the iOS payload does not carry \(one ? "it" : "them")"
        case .android:
            guard given.contains("contentAvailable") else { return nil }
            return "contentAvailable is an iOS flag (aps.content-available), so the Android payload does not carry it"
        }
    }

    /// The payload for `platform`: JSON, two spaces of indent, keys in the seed's order, ending
    /// in a newline.
    public func json(for platform: Platform) -> String {
        func string(_ key: String) -> String? { texts[key].map { JSONText.string($0) } }
        func fields(_ pairs: [(String, String?)]) -> [(String, String)] { pairs.compactMap { key, value in value.map { (key, $0) } } }
        let ids = fields([("_dId", string("deliveryId")), ("_mId", string("messageId")), ("_acsDeliveryTracking", string("tracking"))])
        switch platform {
        case .ios:
            let alert = fields([("body", string("body")), ("title", string("title"))])
            let aps = fields([
                ("alert", alert.isEmpty ? nil : JSONText.object(alert, indent: "    ")),
                ("content-available", contentAvailable ? "1" : nil), ("category", string("category")),
                ("badge", badge.map(String.init)), ("mutable-content", texts["mediaUrl"] != nil ? "1" : nil),
                ("sound", string("sound")),
            ])
            return JSONText.object([("aps", JSONText.object(aps, indent: "  "))]
                                   + custom.map { ($0.key, JSONText.string($0.value)) }
                                   + fields([("media-attachment-url", string("mediaUrl")), ("uri", string("uri"))]) + ids) + "\n"
        case .android:
            let data = ids + fields([("body", string("body")), ("category", string("category"))])
                + custom.map { ($0.key, JSONText.string($0.value)) }
                + fields([("media-attachment-url", string("mediaUrl")), ("sound", string("sound")), ("title", string("title")),
                          ("uri", string("uri")), ("badge", badge.map { JSONText.string(String($0)) })])
            return JSONText.object(fields([("collapseKey", string("collapseKey")), ("priority", JSONText.string(priority))])
                                   + [("data", JSONText.object(data, indent: "  "))]) + "\n"
        }
    }
}
