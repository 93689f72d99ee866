import Foundation
import PushBackend
import PushConfig
import PushExampleWebhook
import PushRegistry
import PushTestSupport
import PushTestThreads
import Testing

/// SPEC §14: `pushreporter schema`, checked with a real JSON Schema validator (Debian's
/// python3-jsonschema, through scripts/schema_check.py, which reads YAML as editors do).
@Suite(.blockingThreads) struct SchemaTests {
    static let checker = RepositoryPaths.root + "/scripts/schema_check.py"

    /// The schema of `backends`, written to a file of `directory`.
    static func schema(_ backends: Backends = .standard, in directory: TemporaryDirectory) -> String {
        directory.write("schema.json", ConfigurationSchema.text(for: backends))
    }

    /// What the checker says of `files` (`--def NAME` first to check against `$defs/NAME`).
    static func check(_ schema: String, _ files: [String]) throws -> ProcessOutput {
        try ProcessRunner.run("/usr/bin/python3", [checker, schema] + files)
    }

    @Test func theShippedConfigurationsAndTemplatesPassIt() throws {
        let directory = TemporaryDirectory()
        let schema = Self.schema(in: directory)
        let meta = try ProcessRunner.run("/usr/bin/python3", ["-c", """
            import json, jsonschema, sys
            jsonschema.Draft202012Validator.check_schema(json.load(open(sys.argv[1])))
            """, schema])
        #expect(meta.status == 0, "the schema is not a valid draft 2020-12 schema: \(meta.stderr)")
        let examples = try FileManager.default.contentsOfDirectory(atPath: RepositoryPaths.root + "/examples")
            .filter { $0.hasSuffix(".yaml") }.sorted().map { RepositoryPaths.root + "/examples/" + $0 }
        #expect(examples.count >= 6)
        let checked = try Self.check(schema, examples)
        #expect(checked.status == 0, "\(checked.stdout)\(checked.stderr)")
        let templates = try FileManager.default.contentsOfDirectory(atPath: RepositoryPaths.templates)
            .filter { $0.hasSuffix(".yaml") }.sorted().map { RepositoryPaths.templates + "/" + $0 }
        let asTemplates = try Self.check(schema, ["--def", "template"] + templates)
        #expect(asTemplates.status == 0, "\(asTemplates.stdout)\(asTemplates.stderr)")
    }

    @Test func everyYAMLBlockOfTheDocsPassesIt() throws {
        let directory = TemporaryDirectory()
        // With the example backend, as docs/adding-a-backend.md registers it.
        let schema = Self.schema(Backends(Backends.standard.all + [ExampleWebhookBackend()]), in: directory)
        var files: [String] = []
        let documents = try FileManager.default.contentsOfDirectory(atPath: RepositoryPaths.root + "/docs")
            .filter { $0.hasSuffix(".md") }.map { "docs/" + $0 } + ["README.md"]
        for document in documents.sorted() {
            let text = try String(contentsOfFile: RepositoryPaths.root + "/" + document, encoding: .utf8)
            for (index, block) in text.components(separatedBy: "```yaml\n").dropFirst().enumerated() {
                let body = block.components(separatedBy: "\n```").first ?? ""
                files.append(directory.write("\(document.replacingOccurrences(of: "/", with: "-"))-\(index).yaml", body + "\n"))
            }
        }
        #expect(files.count >= 10)
        let checked = try Self.check(schema, files)
        #expect(checked.status == 0, "\(checked.stdout)\(checked.stderr)")
    }

    @Test func misspeltKeysWrongTypesAndUnknownTypesAreFlagged() throws {
        let directory = TemporaryDirectory()
        let schema = Self.schema(in: directory)
        let file = directory.write("bad.yaml", """
            agent:
              timout: 5s
              concurrency: lots
              reportInterval: soon
            services:
              j: {type: customer-insights-journey}
              k: {type: adobe-campaign, trackingServr: https://t.example}
            accounts:
              - id: a
                enabled: maybe
                pushTokenReporterTimeout: 5x
              - pushTokenOther: no id nor username
            """)
        let checked = try Self.check(schema, [file])
        #expect(checked.status == 1)
        let lines = checked.stdout.split(separator: "\n").map { $0.replacingOccurrences(of: file + ": ", with: "") }
        for expected in ["at agent: Additional properties are not allowed ('timout' was unexpected)",
                         "at agent/concurrency: 'lots' is not valid under any of the given schemas",
                         "at agent/reportInterval: 'soon' is not valid under any of the given schemas",
                         "at services/j/type: 'customer-insights-journey' is not one of",
                         "at services/k: 'trackingServer' is a required property",
                         "at services/k: Additional properties are not allowed ('trackingServr' was unexpected)",
                         "at accounts/0/enabled: 'maybe' is not valid under any of the given schemas",
                         "at accounts/0/pushTokenReporterTimeout: '5x' is not valid under any of the given schemas",
                         "at accounts/1: "] {
            #expect(lines.contains { $0.hasPrefix(expected) }, "\(expected)\n\(checked.stdout)")
        }
        // What the loader takes, the schema takes: any account key, tags as text, 1h30m.
        let fine = directory.write("fine.yaml", """
            agent: {timeout: 1h30m, reportInterval: off, concurrency: 64, metrics: {perAccount: true}, statePassword: !credential pg}
            accounts:
              - {id: a, myOwnKey: 42, password: !env SIP_PASSWORD, enabled: false, use: [acrobits-json]}
            """)
        let passed = try Self.check(schema, [fine])
        #expect(passed.status == 0, "\(passed.stdout)\(passed.stderr)")
    }

    @Test func itNamesWhatTheLoaderTakesNeitherMoreNorLess() {
        #expect(AgentSettings.schemaKeys.map(\.name).sorted() == AgentSettings.loaderKeys.sorted())
        let text = ConfigurationSchema.text(for: .standard)
        for key in ConfigurationKeys.topLevel { #expect(text.contains("\"\(key)\": {"), "\(key)") }
        for backend in Backends.standard.all where backend.settingsSchema != nil {
            #expect(text.contains("\"service-\(backend.type)\": {"), "\(backend.type)")
        }
    }
}
