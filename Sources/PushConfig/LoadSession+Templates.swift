import Dispatch
import PushTemplates
import PushSystem
#if canImport(Glibc)
import Glibc
#endif

/// `use:` templates: their files found beside the configuration or on the search path, read once.
extension LoadSession {
    mutating func templateNames(_ node: YAMLNode, file: String) -> [(name: String, scalar: YAMLScalar)] {
        switch node {
        case .scalar(let scalar): return [(scalar.value, scalar)]
        case .sequence(let sequence):
            return sequence.items.compactMap { item in
                if case .scalar(let scalar) = item { return (scalar.value, scalar) }
                diagnostics.error("use: takes template names, not \(item.kindDescription)", file: file, at: item.start)
                return nil
            }
        case .mapping(let mapping):
            diagnostics.error("use: takes a template name or a list of them, not a mapping", file: file, at: mapping.start)
            return []
        }
    }

    /// The keys of the template `name`, found beside the config file or on the search path.
    /// The key under which the template `name` written in `file` is looked up.
    func templateLookup(_ name: String, file: String) -> String {
        FileSystem.join(FileSystem.directory(of: file), "templates") + "\u{0}" + name
    }

    mutating func template(named name: String, file: String, at position: SourcePosition, account: String?) -> AccountValueTable? {
        let folders = [FileSystem.join(FileSystem.directory(of: file), "templates")] + environment.templateSearchPath
        guard !name.isEmpty, !name.contains("/"), !name.hasPrefix(".") else {
            diagnostics.error("'\(name)' is not a template name", file: file, at: position, account: account)
            return nil
        }
        let lookup = templateLookup(name, file: file)
        if let path = templatePaths[lookup] { return templateCache[path] ?? nil }
        var candidates: [String] = []
        for folder in folders {
            for ext in [".yaml", ".yml"] {
                let path = FileSystem.join(folder, name + ext)
                if case .success(.file) = FileSystem.kind(of: path) { candidates.append(path) }
            }
        }
        guard let path = candidates.first else {
            let known = Set(folders.flatMap { folder -> [String] in
                guard case .success(let names) = FileSystem.list(folder) else { return [] }
                return names.filter { $0.hasSuffix(".yaml") || $0.hasSuffix(".yml") }.map { String($0.prefix { $0 != "." }) }
            })
            var message = "no template named '\(name)' in \(folders.joined(separator: ", "))"
            if let nearest = NameSuggester.nearest(to: name, among: known) {
                message += "; did you mean '\(nearest)'?"
            } else if known.isEmpty {
                // No template anywhere: the shipped ones are not installed, or not on the path.
                message += "; none of these folders holds a template: run 'make install', or set PUSHREPORTER_TEMPLATES to the templates folder of the source tree"
            }
            diagnostics.error(message, file: file, at: position, account: account)
            return nil
        }
        templatePaths[lookup] = path
        if let cached = templateCache[path] { return cached }
        var keys: AccountValueTable?
        if let mapping = parse(path, what: "template") {
            var entries: [(key: String, value: ConfigValue)] = []
            for pair in mapping.entries {
                let (key, value) = (pair.key, pair.value)
                if key.value == "services" {
                    var services = AccountLayer()
                    readServices(value, into: &services, file: path, what: "template '\(name)'", account: nil)
                    templateServiceCache[path] = services.services
                    continue
                }
                guard case .scalar(let scalar) = value else {
                    diagnostics.error("template key '\(key.value)' must be a single value, not \(value.kindDescription)", file: path, at: value.start)
                    continue
                }
                if var resolved = resolve(scalar, key: key.value, file: path, account: nil) {
                    resolved.template = name
                    entries.append((key.value, resolved))
                }
            }
            var values = AccountValueTable()
            overlay(&values, with: entries, file: path, account: nil)
            keys = values
        }
        templateCache[path] = keys
        return keys
    }
}
