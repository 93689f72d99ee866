import Foundation
@testable import PushConfig
@testable import PushAcrobits
import PushAgent
import PushBackend
import PushRegistry
import PushFCM
import PushTemplates
import PushTestSupport
import Testing
import PushTestThreads

/// The examples in docs/ are run: templates render to what the page says, configurations load clean.
@Suite("The docs' examples work as written", .blockingThreads)
struct DocsTests {
    /// The fenced blocks of `language` in a Markdown file.
    static func blocks(_ language: String, in file: String) throws -> [String] {
        let text = try String(contentsOfFile: RepositoryPaths.root + "/" + file, encoding: .utf8)
        var blocks: [String] = []
        var current: [Substring]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line == "```" + language {
                current = []
            } else if current != nil, line == "```" {
                blocks.append(current!.joined(separator: "\n") + "\n")
                current = nil
            } else if current != nil {
                current!.append(line)
            }
        }
        return blocks
    }

    struct DocScope: TemplateScope {
        var names: [String] = []
        mutating func slot(forVariable name: String) -> Int? {
            guard DeviceValues.names.contains(name) || BuiltinVariable(rawValue: name) != nil else { return nil }
            return intern(name)
        }
        mutating func slot(forVariable name: String, key: String) -> Int? {
            name == "account" ? intern("account[\(key)]") : nil
        }
        mutating func intern(_ name: String) -> Int {
            if let index = names.firstIndex(of: name) { return index }
            names.append(name)
            return names.count - 1
        }
        var variableNames: [String] { DeviceValues.names }
        var keyedVariableNames: [String] { ["account"] }
    }

    struct DocValues: TemplateValues {
        var names: [String]
        var values: [String: String]
        func value(at slot: Int) -> String { values[names[slot]] ?? "" }
        func isSecret(at slot: Int) -> Bool { false }
    }

    static let kinds: [String: TemplateKind] = [
        "url": .url, "form": .body(.form), "json": .body(.json), "xml": .body(.xml), "raw": .body(.raw),
        "header": .headerValue, "plain": .plain,
    ]

    @Test("every template-example in docs/templates.md renders to its result")
    func templateExamples() throws {
        let examples = try Self.blocks("template-example", in: "docs/templates.md")
        #expect(examples.count >= 10)
        for example in examples {
            let parsed = YAMLParser.parse(Array(example.utf8))
            guard case .mapping(let mapping)? = parsed.root else {
                Issue.record("not a mapping: \(example)")
                continue
            }
            let kind = try #require(mapping["kind"]?.scalarValue.flatMap { Self.kinds[$0] }, "\(example)")
            let source = try #require(mapping["template"]?.scalarValue)
            let expected = try #require(mapping["result"]?.scalarValue)
            var values: [String: String] = [:]
            if case .mapping(let given)? = mapping["values"] {
                for entry in given.entries { values[entry.key.value] = entry.value.scalarValue }
            }
            var scope = DocScope()
            let compiled = Template.compile(source, kind: kind, scope: &scope)
            let template = try #require(compiled.template, "\(compiled.issues) in \(source)")
            #expect(try template.render(DocValues(names: scope.names, values: values)) == expected)
        }
    }

    @Test("every yaml block in docs/configuration.md and docs/deploying.md loads without an error")
    func configurationExamples() throws {
        let examples = try Self.blocks("yaml", in: "docs/configuration.md") + Self.blocks("yaml", in: "docs/deploying.md")
        #expect(examples.count >= 6)
        let credentials = TemporaryDirectory()
        credentials.write("receiver-token", "token-from-systemd\n")
        credentials.write("journeys-token", "journeys-token-from-systemd\n")
        credentials.write("pgpassword", "pg-password-from-systemd\n")
        for example in examples {
            let directory = TemporaryDirectory()
            directory.write("secrets/token", "file-token\n")
            directory.write("private-ca.pem", "-----BEGIN CERTIFICATE-----\n")
            let path = directory.write("config.yaml", example)
            let environment = LoaderEnvironment(variables: ["JOHN_PASSWORD": "pw", "CREDENTIALS_DIRECTORY": credentials.path],
                                                templateSearchPath: [RepositoryPaths.templates])
            let result = ConfigurationLoader(environment: environment).load(paths: [path])
            var diagnostics = result.diagnostics
            Backends.standard.check(BackendContext(configuration: result.configuration, sources: result.sources, installID: nil,
                                                   hostname: "h"), diagnostics: &diagnostics)
            let errors = diagnostics.all.filter { $0.severity == .error }.map(\.formatted)
            #expect(errors.isEmpty, "\(errors)\n\(example)")
        }
    }

    @Test("the shipped templates and the examples validate clean, with no warning but Google's deprecation of device groups")
    func examplesValidate() throws {
        let environment = LoaderEnvironment(variables: [:], templateSearchPath: [])
        let result = ConfigurationLoader(environment: environment).load(paths: [RepositoryPaths.examples])
        var diagnostics = result.diagnostics
        Backends.standard.check(BackendContext(configuration: result.configuration, sources: result.sources, installID: nil,
                                               hostname: "h"), diagnostics: &diagnostics)
        // Every fcm-device-group service is warned about, however right it is (SPEC §9.3, §10).
        let deprecation = diagnostics.all.filter { $0.severity == .warning && $0.message == DeviceGroupDeprecation.warning }
        #expect(deprecation.map { "\(($0.file as NSString).lastPathComponent):\($0.line)" } == ["06-fcm.yaml:13"])
        #expect(diagnostics.all.filter { $0.message != DeviceGroupDeprecation.warning }.map(\.formatted) == [])
        #expect(result.configuration.accounts.count == 13)
        #expect(result.configuration.services.keys.sorted() == ["adobe", "fcm", "journeys"])
    }
}
