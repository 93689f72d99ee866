import PushConfig

/// `pushreporter schema` (SPEC §14): a JSON Schema (draft 2020-12) of a configuration file, for
/// editors (yaml-language-server, JetBrains) and CI. It is made from the lists the loader checks
/// against (the top-level and `agent` keys, each backend's settings, the account keys), so the
/// two cannot drift: where the loader refuses unknown keys the schema does too, and accounts
/// and `defaults` take any key, the known ones described. A tagged value (`!env`, `!file`,
/// `!credential`) is a string to it. Values are read as YAML 1.2's core schema reads them, as
/// editors do: `30` is a number, `true` a boolean, `off` a string.
public enum ConfigurationSchema {
    /// The schema's text, for `backends`.
    public static func text(for backends: Backends) -> String {
        document(for: backends).rendered() + "\n"
    }

    static func document(for backends: Backends) -> JSONValue {
        let typed = backends.all.compactMap { backend in backend.settingsSchema.map { (backend.type, $0) } }
        var defs: [(String, JSONValue)] = [
            ("value", .object([("description", .string("A single value: text, a number or true/false; a tagged value (!env NAME, !file PATH, !credential NAME) is text.")),
                               ("type", .array([.string("string"), .string("number"), .string("boolean")]))])),
            ("duration", .object([
                ("description", .string("A duration: 500ms, 5s, 15m, 24h, 2d, a compound from the largest unit down (1h30m), or a number of seconds.")),
                ("anyOf", .array([
                    .object([("type", .string("string")), ("pattern", .string(#"^(?:[0-9]*\.?[0-9]+(?:d|h|m|s|ms))+$|^[0-9]*\.?[0-9]+$"#))]),
                    .object([("type", .string("number")), ("exclusiveMinimum", .number(0))]),
                ])),
            ])),
            ("durationOrOff", .object([("anyOf", .array([.ref("duration"), .object([("const", .string("off"))])]))])),
            ("url", .object([("description", .string("An http:// or https:// URL.")), ("type", .string("string")),
                             ("pattern", .string("^[Hh][Tt][Tt][Pp][Ss]?://"))])),
            ("boolean", .object([("anyOf", .array([.object([("type", .string("boolean"))]),
                                                    .object([("enum", .array([.string("true"), .string("false")]))])]))])),
            ("agent", agent()),
            ("accountKeys", accountKeys(backends)),
            ("account", .object([
                ("description", .string("An account: its keys are its Account parameters (%account[KEY]%), any key is taken.")),
                ("allOf", .array([.ref("accountKeys")])),
                ("anyOf", .array([.object([("required", .array([.string("id")]))]), .object([("required", .array([.string("username")]))])])),
            ])),
            ("template", .object([
                ("description", .string("A use: template file (templates/*.yaml): account keys, and a services: block.")),
                ("allOf", .array([.ref("accountKeys")])),
            ])),
            ("service", service(typed)),
        ]
        for (type, schema) in typed { defs.append(("service-" + type, settings(type: type, schema))) }
        return .object([
            ("$schema", .string("https://json-schema.org/draft/2020-12/schema")),
            ("$id", .string("https://pushreporter.invalid/schema/\(PushReporterVersion.current)/configuration.json")),
            ("title", .string("pushreporter configuration")),
            ("description", .string("A pushreporter configuration file (docs/configuration.md). Every top-level key is optional.")),
            ("type", .string("object")),
            ("additionalProperties", .bool(false)),
            ("properties", .object(ConfigurationKeys.topLevel.map { key in (key, topLevel(key)) })),
            ("$defs", .object(defs)),
        ])
    }

    static func topLevel(_ key: String) -> JSONValue {
        switch key {
        case "agent": .ref("agent")
        case "globals": .object([("description", .string("Values every template can use as %name%.")), ("type", .string("object")),
                                 ("additionalProperties", .ref("value"))])
        case "defaults": .object([("description", .string("Keys every account of this file starts with.")),
                                  ("allOf", .array([.ref("accountKeys")]))])
        case "accounts": .object([("type", .string("array")), ("items", .ref("account"))])
        default: .object([("description", .string("Services by name; each names its type.")), ("type", .string("object")),
                          ("additionalProperties", .ref("service"))])
        }
    }

    /// The `agent:` block, from ``AgentSettings/schemaKeys`` (which the loader checks against).
    static func agent() -> JSONValue {
        .object([
            ("description", .string("Agent-wide settings; only one file may set a given key.")),
            ("type", .string("object")),
            ("additionalProperties", .bool(false)),
            ("properties", .object(AgentSettings.schemaKeys.map { key in (key.name, value(key.kind, doc: key.doc)) })),
        ])
    }

    /// What accounts, `defaults` and templates hold: any key, those pushreporter acts on described.
    static func accountKeys(_ backends: Backends) -> JSONValue {
        var properties: [(String, JSONValue)] = [
            ("id", value(.text, doc: "The account's name in logs, status and the state (default: username).")),
            ("username", value(.text, doc: "The SIP username (%account[username]%).")),
            ("password", value(.text, doc: "The SIP password; a secret: masked in previews and logs.")),
            ("enabled", value(.boolean, doc: "false leaves the account out (default true).")),
            ("use", .object([("description", .string("Templates (templates/NAME.yaml) under the account's own keys.")),
                             ("anyOf", .array([.object([("type", .string("string"))]),
                                               .object([("type", .string("array")), ("items", .object([("type", .string("string"))]))])]))])),
            ("services", .object([
                ("description", .string("The services this account has a subscription of, each with its values (userId, platform, …).")),
                ("type", .string("object")),
                ("additionalProperties", .object([("type", .string("object")), ("additionalProperties", .ref("value"))])),
            ])),
        ]
        for name in DeviceValues.names {
            properties.append((name, value(.text, doc: "A device value (%\(name)%).")))
        }
        let documented = Set(properties.map(\.0))
        let described = backends.all.flatMap { ($0.settingsSchema?.acceptsOtherSettings == true ? $0.settingsSchema?.settings : nil) ?? [] }
        for setting in described where !documented.contains(setting.name) {
            properties.append((setting.name, value(setting.kind, doc: setting.doc)))
        }
        for name in backends.accountKeys where !properties.contains(where: { $0.0 == name }) {
            properties.append((name, value(.text, doc: "")))
        }
        return .object([("type", .string("object")), ("properties", .object(properties)), ("additionalProperties", .ref("value"))])
    }

    /// A `services:` entry: its `type`, then the settings of that type.
    static func service(_ typed: [(String, SettingsSchema)]) -> JSONValue {
        .object([
            ("type", .string("object")),
            ("required", .array([.string("type")])),
            ("properties", .object([("type", .object([("description", .string("The backend: " + typed.map(\.0).joined(separator: ", ") + ".")),
                                                      ("enum", .array(typed.map { .string($0.0) }))]))])),
            ("allOf", .array(typed.map { type, _ in
                .object([("if", .object([("properties", .object([("type", .object([("const", .string(type))]))]))])),
                         ("then", .ref("service-" + type))])
            })),
        ])
    }

    static func settings(type: String, _ schema: SettingsSchema) -> JSONValue {
        var fields: [(String, JSONValue)] = [
            ("description", .string(schema.doc)),
            ("type", .string("object")),
            ("properties", .object([("type", .object([("const", .string(type))]))]
                                   + schema.settings.map { ($0.name, value($0.kind, doc: $0.doc)) })),
        ]
        if !schema.required.isEmpty { fields.append(("required", .array(schema.required.map(JSONValue.string)))) }
        fields.append(("additionalProperties", schema.acceptsOtherSettings ? .ref("value") : .bool(false)))
        return .object(fields)
    }

    static func value(_ kind: SettingsSchema.Kind, doc: String) -> JSONValue {
        let body: [(String, JSONValue)] = switch kind {
        case .text: [("$ref", .string("#/$defs/value"))]
        case .url: [("$ref", .string("#/$defs/url"))]
        case .duration: [("$ref", .string("#/$defs/duration"))]
        case .durationOrOff: [("$ref", .string("#/$defs/durationOrOff"))]
        case .boolean: [("$ref", .string("#/$defs/boolean"))]
        case .integer(let minimum, let maximum):
            [("anyOf", .array([.object([("type", .string("integer")), ("minimum", .number(Double(minimum))), ("maximum", .number(Double(maximum)))]),
                               .object([("type", .string("string")), ("pattern", .string("^[0-9]+$"))])]))]
        case .mapping: [("type", .string("object")), ("additionalProperties", .ref("value"))]
        case .oneOf(let words):
            // Any case, as the loader reads them.
            [("type", .string("string")),
             ("pattern", .string("^(?:" + words.map { $0.map { "[\($0.uppercased())\($0.lowercased())]" }.joined() }.joined(separator: "|") + ")$"))]
        case .object(let keys):
            [("type", .string("object")), ("additionalProperties", .bool(false)),
             ("properties", .object(keys.map { ($0.name, value($0.kind, doc: $0.doc)) }))]
        case .guarded(let keys):
            [("anyOf", .array([.object([("const", .string("off"))]),
                               .object([("type", .string("object")), ("additionalProperties", .bool(false)),
                                        ("properties", .object(keys.map { ($0.name, value($0.kind, doc: $0.doc)) }))])]))]
        }
        return .object((doc.isEmpty ? [] : [("description", .string(doc))]) + body)
    }
}

/// A JSON value, written with two-space indentation and keys in the order given.
indirect enum JSONValue: Sendable {
    case string(String)
    case number(Double)
    case bool(Bool)
    case array([JSONValue])
    case object([(String, JSONValue)])

    static func ref(_ name: String) -> JSONValue { .object([("$ref", .string("#/$defs/" + name))]) }

    func rendered(indent: String = "") -> String {
        switch self {
        case .string(let text): JSONText.string(text)
        case .number(let value): value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
        case .bool(let value): value ? "true" : "false"
        case .array(let items):
            items.isEmpty ? "[]" : items.allSatisfy(\.isScalar)
                ? "[" + items.map { $0.rendered() }.joined(separator: ", ") + "]"
                : "[\n" + items.map { indent + "  " + $0.rendered(indent: indent + "  ") }.joined(separator: ",\n") + "\n" + indent + "]"
        case .object(let fields):
            fields.isEmpty ? "{}"
                : "{\n" + fields.map { indent + "  " + JSONText.string($0.0) + ": " + $0.1.rendered(indent: indent + "  ") }.joined(separator: ",\n")
                    + "\n" + indent + "}"
        }
    }

    var isScalar: Bool {
        switch self {
        case .string, .number, .bool: true
        case .array, .object: false
        }
    }
}
